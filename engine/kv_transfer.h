// Moving a handed-off sequence between two engines in one process: reserve
// blocks on the receiver, copy the K/V contents of the blocks it lacks from
// the sender's executor into the receiver's, let the sequence decode there,
// free the sender's blocks. A simulated fleet spreads the same four calls
// over time (the transfer's duration); this does them at once.
#pragma once

#include "engine/engine.h"

namespace testbed {

struct KvTransferStats {
  int num_blocks = 0;         // blocks whose contents were copied
  int num_reused_blocks = 0;  // blocks the receiver already held (prefix cache)
  size_t num_bytes = 0;       // bytes copied (0 for executors that hold no contents)
};

// False (nothing moved, `h` untouched) when the receiver has no room.
bool transfer_kv(Engine& from, Engine& to, HandOff& h, double now, KvTransferStats* stats = nullptr);

}  // namespace testbed
