// W4A16 GEMM for small M (kernels/gemm/gemm.h). A block of 128 threads owns 32
// output columns and 16 rows: thread t works on column t / 4 and on every
// fourth 32-bit word (8 weights) of it along K, so the four threads of a
// column sit in adjacent lanes and reduce with two shuffles. For each K chunk
// of 256 the block stages its 16 rows of A in shared memory as fp32; each
// thread dequantizes its words in registers ((code - zero) * scale) and
// accumulates 16 row sums in fp32.
#include <cuda_runtime_api.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/gemm/gemm.h"

namespace testbed {
namespace {

constexpr int kCols = 32, kRows = 16, kThreads = 128, kChunk = 256;  // kChunk: K per shared-memory stage

template <class T>
__global__ void w4a16_kernel(const T* __restrict__ a, const uint32_t* __restrict__ qweight, const T* __restrict__ scales,
                             const uint8_t* __restrict__ zeros, float* __restrict__ c, int m, int n, int k, int group,
                             float beta) {
  __shared__ float as[kRows][kChunk];
  const int col = blockIdx.x * kCols + threadIdx.x / 4, lane4 = threadIdx.x % 4;
  const int row0 = blockIdx.y * kRows, rows = min(kRows, m - row0);
  const int words = k / 8, groups = k / group;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kChunk) {
    __syncthreads();
    for (int i = threadIdx.x; i < kRows * kChunk; i += kThreads) {
      const int r = i / kChunk, kk = i % kChunk;
      as[r][kk] = r < rows ? Half16<T>::to_float(a[static_cast<size_t>(row0 + r) * k + k0 + kk]) : 0.0f;
    }
    __syncthreads();
    if (col < n) {
      for (int w = lane4; w < kChunk / 8; w += 4) {
        const int kw = k0 / 8 + w;  // word index along K
        const uint32_t q = qweight[static_cast<size_t>(col) * words + kw];
        const int g = (kw * 8) / group;
        const float s = Half16<T>::to_float(scales[static_cast<size_t>(col) * groups + g]);
        const float z = zeros ? static_cast<float>(zeros[static_cast<size_t>(col) * groups + g]) : 8.0f;
        float wv[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) wv[j] = (static_cast<float>((q >> (4 * j)) & 0xFu) - z) * s;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float sum = 0.0f;
#pragma unroll
          for (int j = 0; j < 8; ++j) sum += as[r][w * 8 + j] * wv[j];
          acc[r] += sum;
        }
      }
    }
  }
  // The four threads of a column are lanes 4c .. 4c + 3 of one warp.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], 1);
    acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], 2);
  }
  if (col < n && lane4 == 0)
    for (int r = 0; r < rows; ++r) {
      float* out = c + static_cast<size_t>(row0 + r) * n + col;
      *out = beta != 0.0f ? acc[r] + beta * *out : acc[r];
    }
}

}  // namespace

cudaError_t launch_w4a16_gemm(const W4A16Params& p, cudaStream_t stream) {
  if (p.m < 0 || p.n < 0 || p.k < 0) return cudaErrorInvalidValue;
  if (p.m == 0 || p.n == 0) return cudaSuccess;
  if (p.group != 32 && p.group != 64 && p.group != 128) return cudaErrorInvalidValue;
  if (p.k == 0 || p.k % kChunk != 0 || p.k % p.group != 0) return cudaErrorInvalidValue;
  if (!p.a || !p.qweight || !p.scales || !p.c) return cudaErrorInvalidValue;
  const dim3 grid((p.n + kCols - 1) / kCols, (p.m + kRows - 1) / kRows);
  if (grid.y > 65535) return cudaErrorInvalidValue;
  if (p.dtype == DType::kBF16)
    w4a16_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(p.a), p.qweight,
                                                                static_cast<const __nv_bfloat16*>(p.scales), p.zeros,
                                                                p.c, p.m, p.n, p.k, p.group, p.beta);
  else if (p.dtype == DType::kFP16)
    w4a16_kernel<__half><<<grid, kThreads, 0, stream>>>(static_cast<const __half*>(p.a), p.qweight,
                                                        static_cast<const __half*>(p.scales), p.zeros, p.c, p.m, p.n,
                                                        p.k, p.group, p.beta);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace testbed
