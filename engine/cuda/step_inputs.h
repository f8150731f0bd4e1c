// The host half of a CUDA executor step: the batch flattened into the index
// arrays the kernels read, exactly as CpuExecutor flattens it (one row per new
// token at positions num_computed .. num_computed + num_new - 1, the CSR block
// table of kv_layout.h, the row each sampling item samples from). Pure C++, so
// tests/kernels/test_cuda_step_inputs.cpp checks it without a GPU.
//
// Rows are ordered with the multi-token items (prefill chunks) first and the
// one-token items (decodes) after them, so the paged prefill kernel takes rows
// [0, num_prefill_rows) and the split-K decode kernel the rest, both reading
// the same q / out buffers and suffixes of one CSR table.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/batch.h"
#include "kernels/attention/decode_plan.h"

namespace testbed {

struct StepInputs {
  std::vector<int32_t> token_ids, positions, slot_mapping;  // [T]
  std::vector<int32_t> q_indptr{0};                         // [num_prefill + 1], rows of the prefill items
  std::vector<int32_t> kv_indptr{0}, kv_indices, seq_lens;  // CSR over all items, prefill items first
  std::vector<int32_t> sample_rows;                         // [S] the row each sampling item samples from
  std::vector<int> sample_items;                            // [S] that item's index in the batch
  int num_prefill = 0, num_decode = 0, num_prefill_rows = 0, max_q_len = 0, max_decode_len = 0;
  DecodePlan plan;  // for the decode items
  // Element offsets of each array in the one int32 upload (see pack()).
  size_t o_tokens = 0, o_positions = 0, o_slots = 0, o_q_indptr = 0, o_kv_indptr = 0, o_kv_indices = 0,
         o_seq_lens = 0, o_sample_rows = 0;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }

  // Every index array back to back, recording where each starts.
  std::vector<int32_t> pack() {
    std::vector<int32_t> ints;
    auto append = [&ints](const std::vector<int32_t>& v) {
      const size_t off = ints.size();
      ints.insert(ints.end(), v.begin(), v.end());
      return off;
    };
    o_tokens = append(token_ids);
    o_positions = append(positions);
    o_slots = append(slot_mapping);
    o_q_indptr = append(q_indptr);
    o_kv_indptr = append(kv_indptr);
    o_kv_indices = append(kv_indices);
    o_seq_lens = append(seq_lens);
    o_sample_rows = append(sample_rows);
    return ints;
  }
};

// Throws std::runtime_error when a position reaches max_model_len or a block
// table is too short for the scheduled tokens. Items with no new token are skipped.
inline StepInputs flatten_batch(const Batch& batch, int block_size, int max_model_len, int num_kv_heads, int num_sms,
                                int decode_ctas_per_sm = 2) {
  StepInputs in;
  std::vector<int> order;
  for (int pass = 0; pass < 2; ++pass)
    for (int s = 0; s < batch.num_seqs(); ++s) {
      const int n = batch.items[s].num_new;
      if (n > 0 && (n > 1) == (pass == 0)) order.push_back(s);
    }
  for (int s : order) {
    const ScheduledSeq& item = batch.items[s];
    const Sequence& seq = *item.seq;
    const int end = item.num_computed + item.num_new;
    if (end > max_model_len) throw std::runtime_error("CUDA executor: position beyond max_model_len");
    if (static_cast<size_t>((end + block_size - 1) / block_size) > seq.block_table.size())
      throw std::runtime_error("CUDA executor: block table too short for the scheduled tokens");
    for (int p = item.num_computed; p < end; ++p) {
      in.token_ids.push_back(seq.tokens()[p]);
      in.positions.push_back(p);
      in.slot_mapping.push_back(seq.block_table[p / block_size] * block_size + p % block_size);
    }
    in.kv_indices.insert(in.kv_indices.end(), seq.block_table.begin(), seq.block_table.end());
    in.kv_indptr.push_back(static_cast<int32_t>(in.kv_indices.size()));
    in.seq_lens.push_back(end);
    if (item.num_new > 1) {
      ++in.num_prefill;
      in.q_indptr.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.max_q_len = std::max(in.max_q_len, item.num_new);
    } else {
      ++in.num_decode;
      in.max_decode_len = std::max(in.max_decode_len, end);
    }
    if (item.samples()) {
      in.sample_rows.push_back(static_cast<int32_t>(in.token_ids.size()) - 1);
      in.sample_items.push_back(s);
    }
  }
  in.num_prefill_rows = in.q_indptr.back();
  if (in.num_decode > 0)
    in.plan = plan_decode(in.num_decode, num_kv_heads, in.max_decode_len, num_sms, decode_ctas_per_sm);
  return in;
}

}  // namespace testbed
