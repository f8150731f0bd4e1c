// CUDA attention kernels: host API (plain C++ types; implementations in *.cu).
//
//   prefill (paged):   causal attention of each sequence's new query tokens
//                      over ALL its keys in the paged cache (context already
//                      cached by an earlier step or a prefix-cache hit, plus
//                      the new tokens, which the caller has written first).
//   prefill (varlen):  the same tiled kernel over contiguous K/V (cu_seqlens).
//   decode (paged):    one query token per sequence; all q heads of a GQA group
//                      in one CTA, the sequence split across CTAs (flash-decoding)
//                      with a second kernel merging the splits.
//   naive:             scores materialised in global memory (cuBLAS GEMMs + a
//                      softmax kernel), the baseline papers compare against.
//
// Conventions shared by every entry point:
//   - dtype of q, out, K and V: DType::kBF16 or kFP16; fp32 accumulation.
//   - head_dim 64 or 128; num_q_heads a multiple of num_kv_heads (GQA: q head h
//     reads KV head h / (num_q_heads / num_kv_heads)).
//   - every pointer is device memory; int32 index arrays too.
//   - softmax(scale * q.k) with scale usually 1/sqrt(head_dim).
//   - launchers return cudaErrorInvalidValue for unsupported shapes, else the
//     launch error; they never synchronise, throw or exit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/kv_layout.h"
#include "kernels/attention/decode_plan.h"
#include "kernels/common/dtype.h"

namespace testbed {

// Paged prefill. Query row i of sequence s (rows q_indptr[s] .. q_indptr[s+1]-1)
// sits at position ctx_s + i with ctx_s = seq_lens[s] - q_len_s, and attends to
// positions 0 .. ctx_s + i of the sequence (read through the block table).
struct PagedPrefillParams {
  DType dtype = DType::kBF16;
  const void* q = nullptr;            // [num_tokens, num_q_heads, head_dim]
  void* out = nullptr;                // [num_tokens, num_q_heads, head_dim]
  const int32_t* q_indptr = nullptr;  // [num_seqs + 1], q_indptr[0] = 0
  int num_q_heads = 0;
  int max_q_len = 0;                  // host copy of max_s q_len_s (sizes the grid)
  const void* k_cache = nullptr;      // one layer: [num_blocks, num_kv_heads, block_size, head_dim]
  const void* v_cache = nullptr;      // same
  KvLayout layout;                    // num_kv_heads, head_dim, block_size of the caches
  PagedKvTable table;                 // device CSR block table; table.num_seqs sequences
  float scale = 0.0f;
};
cudaError_t launch_paged_prefill_attention(const PagedPrefillParams& p, cudaStream_t stream);

// Contiguous variable-length attention. Sequence s owns query rows
// cu_seqlens_q[s] .. cu_seqlens_q[s+1]-1 and key rows cu_seqlens_k[s] ..
// cu_seqlens_k[s+1]-1. With `causal`, query i sits at position len_k - len_q + i
// (bottom-right aligned, as dense_attention_ref) and needs len_k >= len_q.
struct VarlenPrefillParams {
  DType dtype = DType::kBF16;
  const void* q = nullptr;                // [total_q, num_q_heads, head_dim]
  void* out = nullptr;                    // [total_q, num_q_heads, head_dim]
  const void* k = nullptr;                // [total_k, num_kv_heads, head_dim]
  const void* v = nullptr;                // [total_k, num_kv_heads, head_dim]
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1]
  const int32_t* cu_seqlens_k = nullptr;  // [num_seqs + 1]
  int num_seqs = 0;
  int max_q_len = 0;                      // host copy of the longest query run
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  bool causal = true;
  float scale = 0.0f;
};
cudaError_t launch_varlen_prefill_attention(const VarlenPrefillParams& p, cudaStream_t stream);

// Paged decode. Sequence s has one query (row s) at position seq_lens[s] - 1 and
// attends to positions 0 .. seq_lens[s] - 1. `plan` comes from plan_decode() on
// the host; when plan.num_splits > 1, `workspace` must hold
// decode_workspace_bytes(plan, num_seqs, num_q_heads, head_dim) bytes.
struct PagedDecodeParams {
  DType dtype = DType::kBF16;
  const void* q = nullptr;  // [num_seqs, num_q_heads, head_dim]
  void* out = nullptr;      // [num_seqs, num_q_heads, head_dim]
  int num_q_heads = 0;
  const void* k_cache = nullptr;  // one layer, as for prefill
  const void* v_cache = nullptr;
  KvLayout layout;
  PagedKvTable table;  // table.num_seqs sequences
  float scale = 0.0f;
  DecodePlan plan;
  void* workspace = nullptr;
};
cudaError_t launch_paged_decode_attention(const PagedDecodeParams& p, cudaStream_t stream);

// How many decode CTAs fit on one SM for this dtype, head_dim and GQA group
// (CUDA occupancy calculator): the ctas_per_sm of plan_decode. 1 when the
// shape is unsupported or the query fails.
int decode_ctas_per_sm(DType dtype, int head_dim, int group);

}  // namespace testbed
