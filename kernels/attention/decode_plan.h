// The host-side work split of paged decode attention (flash-decoding): how many
// CTAs share one sequence's keys. Computed once per step and reused by every
// layer, as FlashInfer's plan/run split does. Pure C++ so it is unit-tested
// without a GPU (tests/kernels/test_decode_plan.cpp).
#pragma once

#include <algorithm>
#include <cstddef>

namespace testbed {

// Keys one decode CTA stages per iteration; split chunks are multiples of it.
constexpr int kDecodeTileKeys = 64;
// Largest GQA group (q heads per KV head) the decode kernel accepts.
constexpr int kDecodeMaxGroup = 16;
// A split shorter than this costs more in the merge than it gains in parallelism.
constexpr int kDecodeMinChunk = 256;

struct DecodePlan {
  int num_splits = 1;  // CTAs per (sequence, KV head); 1 = no merge kernel
  int chunk_size = 0;  // keys per split, a multiple of kDecodeTileKeys (0: whole sequence)
};

// Splits only when (sequences x KV heads) leaves the GPU under-occupied: aims at
// about two CTAs per SM, never below kDecodeMinChunk keys per split.
inline DecodePlan plan_decode(int num_seqs, int num_kv_heads, int max_seq_len, int num_sms) {
  DecodePlan plan;
  const long base = static_cast<long>(std::max(num_seqs, 1)) * std::max(num_kv_heads, 1);
  const long target = 2L * std::max(num_sms, 1);
  const int max_by_len = std::max(1, (max_seq_len + kDecodeMinChunk - 1) / kDecodeMinChunk);
  int splits = static_cast<int>(std::min<long>((target + base - 1) / base, max_by_len));
  splits = std::max(splits, 1);
  if (splits == 1) return plan;
  int chunk = (max_seq_len + splits - 1) / splits;
  chunk = (chunk + kDecodeTileKeys - 1) / kDecodeTileKeys * kDecodeTileKeys;
  plan.chunk_size = chunk;
  plan.num_splits = (max_seq_len + chunk - 1) / chunk;  // rounding the chunk up may save a split
  if (plan.num_splits <= 1) plan = DecodePlan{};
  return plan;
}

// Bytes of the split-K scratch: partial outputs [num_seqs, num_q_heads, num_splits,
// head_dim] and their log-sum-exps [num_seqs, num_q_heads, num_splits], fp32.
inline size_t decode_workspace_bytes(const DecodePlan& plan, int num_seqs, int num_q_heads, int head_dim) {
  if (plan.num_splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(num_seqs) * num_q_heads * plan.num_splits;
  return rows * (static_cast<size_t>(head_dim) + 1) * sizeof(float);
}

}  // namespace testbed
