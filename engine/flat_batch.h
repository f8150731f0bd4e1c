// FlatBatch: a batch as a model forward pass sees it, shared by the CPU and
// CUDA executors: one row per position computed, the CSR block table of
// kv_layout.h, and the rows whose logits are sampled.
//
// Rows are ordered with the multi-row items (prompt chunks, decodes that
// verify proposed tokens) first and the one-row items (plain decodes) after
// them, so a paged prefill kernel takes rows [0, num_multi_rows) and a decode
// kernel the rest, both reading suffixes of one CSR table. Row order does not
// change any row's result (the executors are batch-invariant).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/batch.h"

namespace testbed {

struct FlatBatch {
  std::vector<int32_t> token_ids, positions, slot_mapping;  // [T] per row
  std::vector<int32_t> row_item;                            // [T] the row's flat item
  std::vector<int32_t> order;                               // flat item f is batch item order[f]
  std::vector<int32_t> q_indptr{0};                         // [num_multi + 1] rows of the multi-row items
  std::vector<int32_t> kv_indptr{0}, kv_indices, seq_lens;  // CSR over the flat items
  // Batch item i (batch order) samples from rows logit_rows[logit_indptr[i] .. logit_indptr[i + 1]):
  // its last known token's row, then one per proposed token.
  std::vector<int32_t> logit_indptr{0}, logit_rows;
  int num_multi = 0, num_single = 0, num_multi_rows = 0, max_q_len = 0, max_single_len = 0;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_items() const { return num_multi + num_single; }
};

// Throws std::logic_error when an item reaches max_model_len or its block table
// is too short for its positions (a broken scheduler contract). Items with no
// new position are skipped.
FlatBatch flatten_batch(const Batch& batch, int block_size, int max_model_len);

}  // namespace testbed
