// Elementwise and row-wise kernels of the forward pass (see model_ops.h). Each
// is the simplest correct form: one thread per element, or one warp per row
// where a row reduction is needed. They are a small share of a step's time next
// to the GEMMs and attention.
#include "kernels/common/model_ops.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/fill.h"

namespace testbed {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n, int threads = kThreads) { return static_cast<unsigned>((n + threads - 1) / threads); }

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

__global__ void embedding_gather_kernel(const __nv_bfloat16* __restrict__ table, const int32_t* __restrict__ ids,
                                        int num_tokens, int hidden, float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(num_tokens) * hidden) return;
  const int64_t t = i / hidden, c = i % hidden;
  out[i] = __bfloat162float(table[static_cast<int64_t>(ids[t]) * hidden + c]);
}

// One warp per row; the fp32 sum of squares is reduced across the warp.
template <class OutT>
__global__ void rms_norm_kernel(const float* x, int64_t x_stride, const float* __restrict__ weight,
                                int num_rows, int heads, int dim, float eps, OutT* out, int64_t out_stride) {
  const int row = blockIdx.x * (kThreads / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= num_rows) return;  // whole warps leave; no block barrier follows
  const int t = row / heads, h = row % heads;
  const float* xr = x + t * x_stride + static_cast<int64_t>(h) * dim;
  OutT* yr = out + t * out_stride + static_cast<int64_t>(h) * dim;
  float ss = 0.0f;
  for (int i = lane; i < dim; i += 32) ss += xr[i] * xr[i];
  ss = warp_sum(ss);  // every lane has read its x before any lane writes (in-place safe)
  const float inv = 1.0f / sqrtf(ss / dim + eps);
  for (int i = lane; i < dim; i += 32) store(yr + i, weight[i] * (xr[i] * inv));
}

__global__ void rope_kernel(float* x, int64_t token_stride, int num_tokens, int num_heads, int head_dim,
                            const int32_t* __restrict__ positions, const float* __restrict__ cos_table,
                            const float* __restrict__ sin_table) {
  const int half = head_dim / 2;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(num_tokens) * num_heads * half) return;
  const int k = static_cast<int>(i % half);
  const int64_t th = i / half;
  const int h = static_cast<int>(th % num_heads);
  const int64_t t = th / num_heads;
  const int64_t p = positions[t];
  const float c = cos_table[p * half + k], s = sin_table[p * half + k];
  float* head = x + t * token_stride + static_cast<int64_t>(h) * head_dim;
  const float a = head[k], b = head[k + half];  // this thread owns the pair (k, k + half)
  head[k] = a * c - b * s;
  head[k + half] = b * c + a * s;
}

__global__ void store_kv_cache_kernel(const float* __restrict__ k_src, const float* __restrict__ v_src,
                                      int64_t token_stride, int num_tokens, const int32_t* __restrict__ slot_mapping,
                                      int block_size, int num_kv_heads, int head_dim, int64_t head_stride,
                                      int64_t block_stride, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int width = num_kv_heads * head_dim;
  if (i >= static_cast<int64_t>(num_tokens) * width) return;
  const int64_t t = i / width;
  const int e = static_cast<int>(i % width), g = e / head_dim, c = e % head_dim;
  const int slot = slot_mapping[t];
  if (slot < 0) return;  // a padding token owns no slot
  const int64_t dst = (slot / block_size) * block_stride + g * head_stride +
                      static_cast<int64_t>(slot % block_size) * head_dim + c;
  k_cache[dst] = __float2bfloat16_rn(k_src[t * token_stride + e]);
  v_cache[dst] = __float2bfloat16_rn(v_src[t * token_stride + e]);
}

__global__ void silu_mul_kernel(const float* __restrict__ gate_up, int num_tokens, int inter,
                                __nv_bfloat16* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(num_tokens) * inter) return;
  const int64_t t = i / inter, c = i % inter;
  const float g = gate_up[t * 2 * inter + c], u = gate_up[t * 2 * inter + inter + c];
  out[i] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
}

__global__ void f32_to_bf16_rows_kernel(const float* __restrict__ src, int64_t src_stride, int num_rows, int cols,
                                        __nv_bfloat16* __restrict__ dst, int64_t dst_stride) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(num_rows) * cols) return;
  const int64_t r = i / cols, c = i % cols;
  dst[r * dst_stride + c] = __float2bfloat16_rn(src[r * src_stride + c]);
}

__global__ void gather_rows_kernel(const float* __restrict__ src, const int32_t* __restrict__ rows, int num_rows,
                                   int cols, float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(num_rows) * cols) return;
  const int64_t r = i / cols, c = i % cols;
  out[i] = src[static_cast<int64_t>(rows[r]) * cols + c];
}

// (value, id) is better than (best, best_id) when larger, or equal with a lower
// id. NaN compares false both ways, so it never wins.
__device__ __forceinline__ bool better(float v, int id, float best, int best_id) {
  return v > best || (v == best && id < best_id);
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ logits, int vocab,
                                                          int32_t* __restrict__ out) {
  __shared__ float s_val[kThreads / 32];
  __shared__ int s_id[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float best = -INFINITY;
  int best_id = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (better(row[i], i, best, best_id)) {
      best = row[i];
      best_id = i;
    }
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, o);
    const int id = __shfl_xor_sync(0xffffffffu, best_id, o);
    if (better(v, id, best, best_id)) {
      best = v;
      best_id = id;
    }
  }
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
    s_val[warp] = best;
    s_id[warp] = best_id;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w)
      if (better(s_val[w], s_id[w], best, best_id)) {
        best = s_val[w];
        best_id = s_id[w];
      }
    out[blockIdx.x] = best_id == INT_MAX ? 0 : best_id;  // an all-NaN row falls back to id 0
  }
}

}  // namespace

cudaError_t launch_embedding_gather(const void* table_bf16, const int32_t* token_ids, int num_tokens, int hidden,
                                    float* out, cudaStream_t stream) {
  if (num_tokens <= 0) return cudaSuccess;
  embedding_gather_kernel<<<blocks_for(static_cast<int64_t>(num_tokens) * hidden), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(table_bf16), token_ids, num_tokens, hidden, out);
  return cudaGetLastError();
}

cudaError_t launch_rms_norm(const float* x, int64_t x_token_stride, const float* weight, int num_tokens,
                            int heads_per_token, int dim, float eps, DType out_dtype, void* out,
                            int64_t out_token_stride, cudaStream_t stream) {
  if (out_dtype != DType::kFP32 && out_dtype != DType::kBF16) return cudaErrorInvalidValue;
  const int rows = num_tokens * heads_per_token;
  if (rows <= 0) return cudaSuccess;
  const unsigned grid = blocks_for(rows, kThreads / 32);
  if (out_dtype == DType::kFP32)
    rms_norm_kernel<float><<<grid, kThreads, 0, stream>>>(x, x_token_stride, weight, rows, heads_per_token, dim, eps,
                                                          static_cast<float*>(out), out_token_stride);
  else
    rms_norm_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(
        x, x_token_stride, weight, rows, heads_per_token, dim, eps, static_cast<__nv_bfloat16*>(out), out_token_stride);
  return cudaGetLastError();
}

cudaError_t launch_rope(float* x, int64_t token_stride, int num_tokens, int num_heads, int head_dim,
                        const int32_t* positions, const float* cos, const float* sin, cudaStream_t stream) {
  if (head_dim % 2 != 0) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(num_tokens) * num_heads * (head_dim / 2);
  if (n <= 0) return cudaSuccess;
  rope_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, token_stride, num_tokens, num_heads, head_dim, positions, cos,
                                                      sin);
  return cudaGetLastError();
}

cudaError_t launch_store_kv_cache(const float* k_src, const float* v_src, int64_t token_stride, int num_tokens,
                                  const int32_t* slot_mapping, const KvLayout& layout, void* k_cache_bf16,
                                  void* v_cache_bf16, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(num_tokens) * layout.num_kv_heads * layout.head_dim;
  if (n <= 0) return cudaSuccess;
  store_kv_cache_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      k_src, v_src, token_stride, num_tokens, slot_mapping, layout.block_size, layout.num_kv_heads, layout.head_dim,
      static_cast<int64_t>(layout.head_stride()), static_cast<int64_t>(layout.block_stride()),
      static_cast<__nv_bfloat16*>(k_cache_bf16), static_cast<__nv_bfloat16*>(v_cache_bf16));
  return cudaGetLastError();
}

cudaError_t launch_silu_mul(const float* gate_up, int num_tokens, int inter, void* out_bf16, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(num_tokens) * inter;
  if (n <= 0) return cudaSuccess;
  silu_mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate_up, num_tokens, inter,
                                                          static_cast<__nv_bfloat16*>(out_bf16));
  return cudaGetLastError();
}

cudaError_t launch_f32_to_bf16_rows(const float* src, int64_t src_stride, int num_rows, int cols, void* dst_bf16,
                                    int64_t dst_stride, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(num_rows) * cols;
  if (n <= 0) return cudaSuccess;
  f32_to_bf16_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, src_stride, num_rows, cols,
                                                                  static_cast<__nv_bfloat16*>(dst_bf16), dst_stride);
  return cudaGetLastError();
}

cudaError_t launch_gather_rows(const float* src, const int32_t* rows, int num_rows, int cols, float* out,
                               cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(num_rows) * cols;
  if (n <= 0) return cudaSuccess;
  gather_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, rows, num_rows, cols, out);
  return cudaGetLastError();
}

cudaError_t launch_argmax(const float* logits, int num_rows, int vocab, int32_t* out, cudaStream_t stream) {
  if (num_rows <= 0) return cudaSuccess;
  if (vocab <= 0) return cudaErrorInvalidValue;
  argmax_kernel<<<num_rows, kThreads, 0, stream>>>(logits, vocab, out);
  return cudaGetLastError();
}

namespace {

// Grid-stride: a fixed grid covers buffers of any size (several GB).
template <class T>
__global__ void fill_uniform_kernel(T* out, size_t n, float lo, float hi, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = Half16<T>::from_float(fill_uniform(seed, i, lo, hi));
}

}  // namespace

cudaError_t launch_fill_uniform(void* out, size_t n, DType dtype, float lo, float hi, uint64_t seed,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!out || !(hi >= lo)) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(std::min<size_t>((n + kThreads - 1) / kThreads, 65536));
  if (dtype == DType::kBF16)
    fill_uniform_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(out), n, lo, hi, seed);
  else if (dtype == DType::kFP16)
    fill_uniform_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__half*>(out), n, lo, hi, seed);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

namespace {

__global__ void scale_columns_kernel(const __nv_bfloat16* in, int64_t n, int cols, const float* col_scale,
                                     __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(__bfloat162float(in[i]) * col_scale[i % cols]);
}

}  // namespace

cudaError_t launch_scale_columns_bf16(const void* in_bf16, int rows, int cols, const float* col_scale, void* out_bf16,
                                      cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (!in_bf16 || !col_scale || !out_bf16) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536));
  scale_columns_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(in_bf16), n, cols, col_scale,
                                                       static_cast<__nv_bfloat16*>(out_bf16));
  return cudaGetLastError();
}

}  // namespace testbed
