// Naive attention: S = Q K^T (cuBLAS, fp32 out) -> naive_softmax_kernel -> P
// (16-bit) -> O = P V (cuBLAS). One sequence at a time through the workspace;
// GQA by one strided-batched GEMM per KV head over its group of q heads.
#include "kernels/attention/naive_attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/device_utils.cuh"

namespace testbed {
namespace {

constexpr int kSoftmaxThreads = 256;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  v = is_max ? warp_max(v) : warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = is_max ? -INFINITY : 0.0f;
  for (int w = 0; w < kSoftmaxThreads / 32; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}

// One CTA per score row (q head, query): P = softmax(scale * S) over the keys
// the row may see; the rest of the row gets 0.
template <class T>
__global__ void __launch_bounds__(kSoftmaxThreads)
    naive_softmax_kernel(const float* __restrict__ scores, T* __restrict__ probs, int q_len, int kv_len, float scale,
                         bool causal) {
  __shared__ float scratch[kSoftmaxThreads / 32];
  const size_t row = blockIdx.x;  // h * q_len + i
  const int i = static_cast<int>(row % q_len);
  const int last = causal ? kv_len - q_len + i : kv_len - 1;
  const float* srow = scores + row * kv_len;
  T* prow = probs + row * kv_len;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j <= last; j += kSoftmaxThreads) mx = fmaxf(mx, srow[j] * scale);
  mx = block_reduce(mx, true, scratch);
  float sum = 0.0f;
  for (int j = threadIdx.x; j <= last; j += kSoftmaxThreads) sum += __expf(srow[j] * scale - mx);
  sum = block_reduce(sum, false, scratch);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int j = threadIdx.x; j < kv_len; j += kSoftmaxThreads)
    prow[j] = Half16<T>::from_float(j <= last ? __expf(srow[j] * scale - mx) * inv : 0.0f);
}

}  // namespace

cudaError_t launch_naive_attention(const NaiveAttentionParams& p, cublasHandle_t handle, cudaStream_t stream) {
  const bool ok = (p.dtype == DType::kBF16 || p.dtype == DType::kFP16) && p.head_dim > 0 && p.num_kv_heads > 0 &&
                  p.num_q_heads % p.num_kv_heads == 0 && p.q_len > 0 && p.kv_len > 0 && p.workspace != nullptr;
  if (!ok) return cudaErrorInvalidValue;
  if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  const cudaDataType_t t = p.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  const int d = p.head_dim, hq = p.num_q_heads, hkv = p.num_kv_heads, group = hq / hkv;
  const long long ss = static_cast<long long>(p.q_len) * p.kv_len;  // elements of one head's S
  float* scores = static_cast<float*>(p.workspace);
  char* probs = reinterpret_cast<char*>(scores + ss * hq);
  const int eb = dtype_bytes(p.dtype);
  const float one = 1.0f, zero = 0.0f;
  for (int b = 0; b < p.batch; ++b) {
    const char* qb = static_cast<const char*>(p.q) + static_cast<size_t>(b) * p.q_len * hq * d * eb;
    const char* kb = static_cast<const char*>(p.k) + static_cast<size_t>(b) * p.kv_len * hkv * d * eb;
    const char* vb = static_cast<const char*>(p.v) + static_cast<size_t>(b) * p.kv_len * hkv * d * eb;
    char* ob = static_cast<char*>(p.out) + static_cast<size_t>(b) * p.q_len * hq * d * eb;
    for (int g = 0; g < hkv; ++g) {
      // Column-major view: S_h^T [kv_len x q_len] = K_g [d x kv_len]^T * Q_h [d x q_len].
      if (cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, p.kv_len, p.q_len, d, &one,
                                     kb + static_cast<size_t>(g) * d * eb, t, hkv * d, 0,
                                     qb + static_cast<size_t>(g) * group * d * eb, t, hq * d, d, &zero,
                                     scores + ss * g * group, CUDA_R_32F, p.kv_len, ss, group, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        return cudaErrorUnknown;
    }
    if (p.dtype == DType::kBF16)
      naive_softmax_kernel<__nv_bfloat16><<<static_cast<unsigned>(hq * p.q_len), kSoftmaxThreads, 0, stream>>>(
          scores, reinterpret_cast<__nv_bfloat16*>(probs), p.q_len, p.kv_len, p.scale, p.causal);
    else
      naive_softmax_kernel<__half><<<static_cast<unsigned>(hq * p.q_len), kSoftmaxThreads, 0, stream>>>(
          scores, reinterpret_cast<__half*>(probs), p.q_len, p.kv_len, p.scale, p.causal);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    for (int g = 0; g < hkv; ++g) {
      // O_h^T [d x q_len] = V_g [d x kv_len] * P_h^T [kv_len x q_len]; O rows are hq * d apart.
      if (cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, p.q_len, p.kv_len, &one,
                                     vb + static_cast<size_t>(g) * d * eb, t, hkv * d, 0,
                                     probs + static_cast<size_t>(ss) * g * group * eb, t, p.kv_len, ss, &zero,
                                     ob + static_cast<size_t>(g) * group * d * eb, t, hq * d, d, group,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        return cudaErrorUnknown;
    }
  }
  return cudaSuccess;
}

}  // namespace testbed
