// Measures an executor's step time over a grid of batch shapes (synthetic
// sequences with random tokens and fresh block tables) into a ProfileTable for
// the `profiled` cost model. Used by `testbed profile` and `testbed fidelity`.
#pragma once

#include <functional>
#include <vector>

#include "engine/executor.h"
#include "sim/profile_table.h"

namespace testbed {

struct ProfileGrid {
  std::vector<int> prefill_tokens;  // include 0
  std::vector<int> decode_seqs;     // include 0
  std::vector<int> context;
  int repeats = 3;
  // The first shared_prefix_tokens of every sequence's context sit in the same
  // physical blocks, as the prefix cache lays out a shared system prompt: a
  // decode step then reads that part of the KV once, which is cheaper on any cache.
  int shared_prefix_tokens = 0;
};

// Powers of two up to each limit (and the limit itself), with 0 where it makes sense.
ProfileGrid default_profile_grid(int max_batch_tokens, int max_num_seqs, int max_context);
// KV blocks an executor needs to run every point of the grid.
int blocks_for_grid(const ProfileGrid& grid, int block_size);

// Runs every grid point (repeats times, after one warm-up pass) and keeps the
// median duration the executor reports. `on_point` (optional) is told runs done / total.
ProfileTable profile_executor(Executor& executor, const ProfileGrid& grid, int block_size, int vocab_size,
                              const std::function<void(int, int)>& on_point = nullptr);

}  // namespace testbed
