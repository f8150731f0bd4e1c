// CUDA kernels for the rest of a Llama-family forward pass (everything but the
// dense projections, which go through cuBLAS, and attention). Host API with
// plain types; each launcher returns cudaError_t and never synchronises.
//
// The CUDA executor keeps the residual stream and projection outputs in fp32
// and feeds cuBLAS bf16; 16-bit tensors here are bf16 (passed as void*).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/kv_layout.h"
#include "kernels/common/dtype.h"

namespace testbed {

// out[t, :] = float(table[token_ids[t], :]).
//   table_bf16: [vocab, hidden]; token_ids: [num_tokens]; out: [num_tokens, hidden] fp32
cudaError_t launch_embedding_gather(const void* table_bf16, const int32_t* token_ids, int num_tokens, int hidden,
                                    float* out, cudaStream_t stream);

// RMSNorm of num_tokens x heads_per_token rows of `dim` values:
//   y = x / sqrt(mean(x^2) + eps) * weight
// Row (t, h) starts at x + t * x_token_stride + h * dim (same for out with
// out_token_stride), so one call normalises a hidden state ([T, hidden], one
// "head" of dim = hidden) or every q / k head of a fused QKV row (Qwen3 qk-norm).
//   weight: [dim] fp32; x: fp32; out: fp32 or bf16 (out_dtype); in place allowed for fp32.
cudaError_t launch_rms_norm(const float* x, int64_t x_token_stride, const float* weight, int num_tokens,
                            int heads_per_token, int dim, float eps, DType out_dtype, void* out,
                            int64_t out_token_stride, cudaStream_t stream);

// Rotary embedding (Hugging Face rotate-half convention), in place, on the
// first num_heads heads of each row: head h of token t starts at
// x + t * token_stride + h * head_dim. For a fused [q | k | v] row, num_heads =
// num_q_heads + num_kv_heads rotates q and k together.
//   positions: [num_tokens]; cos, sin: [max_positions, head_dim / 2] fp32
cudaError_t launch_rope(float* x, int64_t token_stride, int num_tokens, int num_heads, int head_dim,
                        const int32_t* positions, const float* cos, const float* sin, cudaStream_t stream);

// Writes each token's K and V (fp32, in a fused row) into the paged bf16 cache.
//   k_src: token t's K heads at k_src + t * token_stride, [num_kv_heads * head_dim]; same for v_src
//   slot_mapping: [num_tokens], block * block_size + slot of each token
//   k_cache, v_cache: one layer, [num_blocks, num_kv_heads, block_size, head_dim] bf16
cudaError_t launch_store_kv_cache(const float* k_src, const float* v_src, int64_t token_stride, int num_tokens,
                                  const int32_t* slot_mapping, const KvLayout& layout, void* k_cache_bf16,
                                  void* v_cache_bf16, cudaStream_t stream);

// out[t, i] = bf16(silu(gate_up[t, i]) * gate_up[t, inter + i]) for i < inter.
//   gate_up: [num_tokens, 2 * inter] fp32 (gate then up); out: [num_tokens, inter] bf16
cudaError_t launch_silu_mul(const float* gate_up, int num_tokens, int inter, void* out_bf16, cudaStream_t stream);

// Strided fp32 -> bf16 copy of num_rows x cols (e.g. the q part of fused QKV rows).
cudaError_t launch_f32_to_bf16_rows(const float* src, int64_t src_stride, int num_rows, int cols, void* dst_bf16,
                                    int64_t dst_stride, cudaStream_t stream);

// out[i, :] = src[rows[i], :] for i < num_rows; src, out fp32 with `cols` columns.
cudaError_t launch_gather_rows(const float* src, const int32_t* rows, int num_rows, int cols, float* out,
                               cudaStream_t stream);

// out[r] = argmax of logits[r, :vocab]; ties go to the lowest id, NaN never wins
// (as std::max_element over the row when it holds no NaN).
cudaError_t launch_argmax(const float* logits, int num_rows, int vocab, int32_t* out, cudaStream_t stream);

// out[r][c] = bf16(in[r][c] * col_scale[c]) for bf16 [rows][cols] (AWQ's input scales, as their inverse).
cudaError_t launch_scale_columns_bf16(const void* in_bf16, int rows, int cols, const float* col_scale, void* out_bf16,
                                      cudaStream_t stream);

// out[i] = fill_uniform(seed, i, lo, hi) (kernels/common/fill.h) rounded to
// `dtype` (bf16 or fp16, round to nearest even), i in [0, n): random
// benchmark inputs the host can recompute.
cudaError_t launch_fill_uniform(void* out, size_t n, DType dtype, float lo, float hi, uint64_t seed,
                                cudaStream_t stream);

}  // namespace testbed
