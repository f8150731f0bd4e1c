#include "engine/kv_transfer.h"

namespace testbed {

bool transfer_kv(Engine& from, Engine& to, HandOff& h, double now, KvTransferStats* stats) {
  const int64_t id = h.kv.seq_id;
  KvImport plan;
  if (!to.begin_import(h, plan)) return false;
  const KvBlockData data = from.executor().read_kv_blocks(plan.source_blocks);
  to.executor().write_kv_blocks(plan.dest_blocks, data);
  to.end_import(id, now);
  from.release_export(id);
  if (stats) {
    stats->num_blocks = static_cast<int>(plan.dest_blocks.size());
    stats->num_reused_blocks = plan.num_reused_blocks;
    stats->num_bytes = data.bytes.size();
  }
  return true;
}

}  // namespace testbed
