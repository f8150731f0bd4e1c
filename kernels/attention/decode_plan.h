// The host-side work split of paged decode attention (flash-decoding): how many
// CTAs share one sequence's keys. Computed once per step and reused by every
// layer, as FlashInfer's plan/run split does. Pure C++ so it is unit-tested
// without a GPU (tests/kernels/test_decode_plan.cpp); ctas_per_sm comes from
// decode_ctas_per_sm() (attention.h), the occupancy of the decode kernel.
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

// Chooses the split count that minimises the modelled time of the slowest CTA
// slot: CTAs run in waves of num_sms * ctas_per_sm, each wave as long as one
// split (chunk keys plus about one tile of start-up). Splitting fills an
// under-occupied GPU (few sequences, long contexts) and evens out a last,
// partial wave; a split must hold at least kDecodeMinChunk keys, and more
// splits must gain at least 3% (the merge kernel is not free).
inline DecodePlan plan_decode(int num_seqs, int num_kv_heads, int max_seq_len, int num_sms, int ctas_per_sm = 2) {
  const long base = static_cast<long>(std::max(num_seqs, 1)) * std::max(num_kv_heads, 1);
  const long slots = static_cast<long>(std::max(num_sms, 1)) * std::max(ctas_per_sm, 1);
  const int len = std::max(max_seq_len, 1);
  const int max_splits = std::max(1, (len + kDecodeMinChunk - 1) / kDecodeMinChunk);
  DecodePlan best;
  double best_cost = 0.0;
  for (int s = 1; s <= max_splits; ++s) {
    int chunk = (len + s - 1) / s;
    chunk = (chunk + kDecodeTileKeys - 1) / kDecodeTileKeys * kDecodeTileKeys;
    const int splits = (len + chunk - 1) / chunk;  // rounding the chunk up may leave fewer, none empty
    if (splits != s) continue;
    const long waves = (base * splits + slots - 1) / slots;
    const double cost = static_cast<double>(waves) * (chunk + kDecodeTileKeys);
    if (s == 1 || cost < 0.97 * best_cost) {
      best_cost = cost;
      best = splits == 1 ? DecodePlan{} : DecodePlan{splits, chunk};
    }
  }
  return best;
}

// Bytes of the split-K scratch: partial outputs [num_seqs, num_q_heads, num_splits,
// head_dim] and their log-sum-exps [num_seqs, num_q_heads, num_splits], fp32.
inline size_t decode_workspace_bytes(const DecodePlan& plan, int num_seqs, int num_q_heads, int head_dim) {
  if (plan.num_splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(num_seqs) * num_q_heads * plan.num_splits;
  return rows * (static_cast<size_t>(head_dim) + 1) * sizeof(float);
}

}  // namespace testbed
