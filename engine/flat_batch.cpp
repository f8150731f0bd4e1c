#include "engine/flat_batch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace testbed {

FlatBatch flatten_batch(const Batch& batch, int block_size, int max_model_len) {
  FlatBatch f;
  for (int pass = 0; pass < 2; ++pass)
    for (int s = 0; s < batch.num_seqs(); ++s) {
      const int n = batch.items[s].num_new;
      if (n > 0 && (n > 1) == (pass == 0)) f.order.push_back(s);
    }
  std::vector<int32_t> first_row(batch.items.size(), 0);
  for (size_t k = 0; k < f.order.size(); ++k) {
    const ScheduledSeq& item = batch.items[f.order[k]];
    const Sequence& seq = *item.seq;
    const int end = item.num_computed + item.num_new;
    if (end > max_model_len)
      throw std::logic_error("executor: sequence " + std::to_string(seq.id()) + " scheduled beyond max_model_len");
    if (static_cast<size_t>((end + block_size - 1) / block_size) > seq.block_table.size())
      throw std::logic_error("executor: sequence " + std::to_string(seq.id()) +
                             "'s block table is too short for its scheduled positions");
    first_row[f.order[k]] = f.num_tokens();
    for (int p = item.num_computed; p < end; ++p) {
      f.token_ids.push_back(item.token_at(p));
      f.positions.push_back(p);
      f.slot_mapping.push_back(seq.block_table[p / block_size] * block_size + p % block_size);
      f.row_item.push_back(static_cast<int32_t>(k));
    }
    f.kv_indices.insert(f.kv_indices.end(), seq.block_table.begin(), seq.block_table.end());
    f.kv_indptr.push_back(static_cast<int32_t>(f.kv_indices.size()));
    f.seq_lens.push_back(end);
    if (item.num_new > 1) {
      ++f.num_multi;
      f.q_indptr.push_back(static_cast<int32_t>(f.token_ids.size()));
      f.max_q_len = std::max(f.max_q_len, item.num_new);
    } else {
      ++f.num_single;
      f.max_single_len = std::max(f.max_single_len, end);
    }
  }
  f.num_multi_rows = f.q_indptr.back();
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const ScheduledSeq& item = batch.items[s];
    const int rows = item.num_new > 0 ? item.num_verified() : 0;
    const int last = first_row[s] + item.num_new;  // one past the item's last row
    for (int j = rows; j > 0; --j) f.logit_rows.push_back(last - j);
    f.logit_indptr.push_back(static_cast<int32_t>(f.logit_rows.size()));
  }
  return f;
}

}  // namespace testbed
