// Naive ("standard") attention, the baseline of the FlashAttention papers: the
// full score matrix is materialised in global memory. S = Q K^T and O = P V run
// on cuBLAS (tensor cores, fp32 accumulation); a softmax kernel turns S into P.
// Used by the benchmark (time and memory against the tiled kernel) and tested
// against the CPU reference like every kernel.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/common/dtype.h"

namespace testbed {

// An equal-length batch, contiguous:
//   q, out: [batch, q_len, num_q_heads, head_dim]; k, v: [batch, kv_len, num_kv_heads, head_dim]
// With `causal`, query i sits at position kv_len - q_len + i (as dense_attention_ref).
struct NaiveAttentionParams {
  DType dtype = DType::kBF16;  // of q, k, v, out (bf16 or fp16)
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  int batch = 0, q_len = 0, kv_len = 0, num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool causal = true;
  float scale = 0.0f;
  void* workspace = nullptr;  // naive_attention_workspace_bytes(...)
};

// S (fp32) and P (dtype) of one sequence, [num_q_heads, q_len, kv_len] each:
// the memory the tiled kernel never allocates.
inline size_t naive_attention_workspace_bytes(int q_len, int kv_len, int num_q_heads, DType dtype) {
  return static_cast<size_t>(num_q_heads) * q_len * kv_len * (4 + dtype_bytes(dtype));
}

// Returns cudaErrorInvalidValue for bad shapes and cudaErrorUnknown when a cuBLAS
// call fails. The handle is bound to `stream`.
cudaError_t launch_naive_attention(const NaiveAttentionParams& p, cublasHandle_t handle, cudaStream_t stream);

}  // namespace testbed
