// FP8 e4m3 GEMM (kernels/gemm/gemm.h): 64 x 64 output tiles, 256 threads each
// computing a 4 x 4 block; A and B tiles of 64 x 32 codes are decoded to fp32
// in shared memory, accumulation in fp32, the scales applied at the end.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include "kernels/gemm/gemm.h"

namespace testbed {
namespace {

constexpr int kTile = 64, kK = 32, kThreads = 256;

__device__ __forceinline__ float e4m3(uint8_t v) {
  __nv_fp8_e4m3 x;
  x.__x = v;
  return static_cast<float>(x);
}

__global__ void fp8_gemm_kernel(Fp8GemmParams p) {
  __shared__ float as[kTile][kK + 1], bs[kTile][kK + 1];  // +1: no bank conflicts on column reads
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < p.k; k0 += kK) {
    for (int i = threadIdx.x; i < kTile * kK; i += kThreads) {
      const int r = i / kK, kk = i % kK, gk = k0 + kk;
      as[r][kk] = (m0 + r < p.m && gk < p.k) ? e4m3(p.a[static_cast<size_t>(m0 + r) * p.k + gk]) : 0.0f;
      bs[r][kk] = (n0 + r < p.n && gk < p.k) ? e4m3(p.b[static_cast<size_t>(n0 + r) * p.k + gk]) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[ty * 4 + i][kk], bv[i] = bs[tx * 4 + i][kk];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = m0 + ty * 4 + i;
    if (row >= p.m) continue;
    const float sa = p.sa[p.a_per_row ? row : 0];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = n0 + tx * 4 + j;
      if (col < p.n) {
        float* out = p.c + static_cast<size_t>(row) * p.n + col;
        const float v = acc[i][j] * sa * p.sb[p.b_per_row ? col : 0];
        *out = p.beta != 0.0f ? v + p.beta * *out : v;
      }
    }
  }
}

}  // namespace

cudaError_t launch_fp8_gemm(const Fp8GemmParams& p, cudaStream_t stream) {
  if (p.m < 0 || p.n < 0 || p.k < 0) return cudaErrorInvalidValue;
  if (p.m == 0 || p.n == 0) return cudaSuccess;
  if (!p.a || !p.b || !p.sa || !p.sb || !p.c || p.k == 0) return cudaErrorInvalidValue;
  const dim3 grid((p.n + kTile - 1) / kTile, (p.m + kTile - 1) / kTile);
  if (grid.y > 65535) return cudaErrorInvalidValue;
  fp8_gemm_kernel<<<grid, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

namespace {

__global__ void quantize_rows_fp8_kernel(const __nv_bfloat16* __restrict__ x, int cols, uint8_t* __restrict__ codes,
                                         float* __restrict__ scales) {
  __shared__ float red[kThreads];
  const __nv_bfloat16* row = x + static_cast<size_t>(blockIdx.x) * cols;
  float amax = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kThreads) amax = fmaxf(amax, fabsf(__bfloat162float(row[c])));
  red[threadIdx.x] = amax;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const float scale = red[0] > 0.0f ? red[0] / 448.0f : 1.0f;
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  uint8_t* out = codes + static_cast<size_t>(blockIdx.x) * cols;
  for (int c = threadIdx.x; c < cols; c += kThreads)
    out[c] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(__bfloat162float(row[c]) / scale, __NV_SATFINITE, __NV_E4M3));
}

}  // namespace

cudaError_t launch_quantize_rows_fp8(const void* x_bf16, int rows, int cols, uint8_t* codes, float* scales,
                                     cudaStream_t stream) {
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (!x_bf16 || !codes || !scales) return cudaErrorInvalidValue;
  quantize_rows_fp8_kernel<<<rows, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(x_bf16), cols, codes, scales);
  return cudaGetLastError();
}

}  // namespace testbed
