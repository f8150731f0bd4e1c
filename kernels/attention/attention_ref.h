// CPU references for attention (fp32 or fp64 accumulation). The paged one is
// also what CpuExecutor runs; the CUDA kernels are tested against both.
#pragma once

#include <cstdint>

#include "engine/kv_layout.h"

namespace testbed {

// Causal attention of query tokens over a paged KV cache (one layer).
//   q, out:     [num_tokens, num_q_heads, head_dim]
//   token_seq:  [num_tokens]  index into `table` of each token's sequence
//   token_pos:  [num_tokens]  position of each token; it attends to positions 0..token_pos
//   k_cache, v_cache: one layer's K and V, laid out as `layout` says (HND)
// num_q_heads is a multiple of layout.num_kv_heads (GQA); head h reads KV head
// h / (num_q_heads / num_kv_heads). Softmax over scale * q.k with fp32 sums in
// position order, so a token's output depends only on its own inputs, never on
// which other tokens share the call (the CPU engine's results are batch-invariant).
void paged_attention_ref(const float* q, float* out, int num_tokens, int num_q_heads, const int32_t* token_seq,
                         const int32_t* token_pos, const float* k_cache, const float* v_cache,
                         const KvLayout& layout, const PagedKvTable& table, float scale);

// Dense attention with the scores materialised, in double precision.
//   q, out: [num_q, num_q_heads, head_dim]; k, v: [num_k, num_kv_heads, head_dim]
// Query i sits at position (num_k - num_q + i) and attends to keys 0..that position
// when `causal`, to every key otherwise.
void dense_attention_ref(const float* q, const float* k, const float* v, float* out, int num_q, int num_k,
                         int num_q_heads, int num_kv_heads, int head_dim, float scale, bool causal);

}  // namespace testbed
