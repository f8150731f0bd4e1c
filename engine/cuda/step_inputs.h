// The host half of a CUDA executor step: the batch flattened by the shared
// flattener (engine/flat_batch.h: multi-row items first, so the paged prefill
// kernel takes rows [0, num_multi_rows) and the split-K decode kernel the
// rest), the decode kernel's split plan, and every index array packed into one
// upload. Pure C++, so it is tested without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/flat_batch.h"
#include "kernels/attention/decode_plan.h"

namespace testbed {

struct StepInputs {
  FlatBatch flat;
  DecodePlan plan;  // for the one-row (decode) items
  // Element offsets of each array in the one int32 upload (see pack()).
  size_t o_tokens = 0, o_positions = 0, o_slots = 0, o_q_indptr = 0, o_kv_indptr = 0, o_kv_indices = 0,
         o_seq_lens = 0, o_logit_rows = 0;

  int num_tokens() const { return flat.num_tokens(); }

  // Every index array back to back, recording where each starts.
  std::vector<int32_t> pack() {
    std::vector<int32_t> ints;
    auto append = [&ints](const std::vector<int32_t>& v) {
      const size_t off = ints.size();
      ints.insert(ints.end(), v.begin(), v.end());
      return off;
    };
    o_tokens = append(flat.token_ids);
    o_positions = append(flat.positions);
    o_slots = append(flat.slot_mapping);
    o_q_indptr = append(flat.q_indptr);
    o_kv_indptr = append(flat.kv_indptr);
    o_kv_indices = append(flat.kv_indices);
    o_seq_lens = append(flat.seq_lens);
    o_logit_rows = append(flat.logit_rows);
    return ints;
  }
};

inline StepInputs make_step_inputs(const Batch& batch, int block_size, int max_model_len, int num_kv_heads, int num_sms,
                                   int decode_ctas_per_sm = 2) {
  StepInputs in;
  in.flat = flatten_batch(batch, block_size, max_model_len);
  if (in.flat.num_single > 0)
    in.plan = plan_decode(in.flat.num_single, num_kv_heads, in.flat.max_single_len, num_sms, decode_ctas_per_sm);
  return in;
}

}  // namespace testbed
