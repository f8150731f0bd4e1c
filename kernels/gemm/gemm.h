// The quantized GEMM kernels on the GPU (layouts and CPU references in
// kernels/gemm/gemm_ref.h). Launchers take device pointers, never
// synchronise, and return cudaErrorInvalidValue for a shape they do not take.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/gemm/gemm_ref.h"

namespace testbed {

// W4A16: c[m][n] (fp32) = sum_k a[m][k] * (code(n, k) - zero(n, k / g)) * scale(n, k / g).
//   a       [M][K] 16-bit (dtype bf16 or fp16)
//   qweight [N][K / 8] uint32, eight codes per word along K (gemm_ref.h)
//   scales  [N][K / g] 16-bit, same dtype as a; zeros [N][K / g] uint8 or null (symmetric: 8)
// Tuned for decode (M 1 .. 64: a block computes 32 columns of up to 16 rows
// and dequantizes each weight once per 16 rows); any M works. K must be a
// multiple of the group (32, 64, 128) and of 256.
struct W4A16Params {
  DType dtype = DType::kBF16;
  const void* a = nullptr;
  const uint32_t* qweight = nullptr;
  const void* scales = nullptr;
  const uint8_t* zeros = nullptr;
  float* c = nullptr;
  int m = 0, n = 0, k = 0, group = 128;
  float beta = 0.0f;  // c = result + beta * c (1: accumulate, as a residual add)
};
cudaError_t launch_w4a16_gemm(const W4A16Params& p, cudaStream_t stream);

// FP8 e4m3: c[m][n] (fp32) = sa[m or 0] * sb[n or 0] * sum_k a[m][k] b[n][k];
//   a [M][K], b [N][K] e4m3 codes; sa [M] (per token) or [1], sb [N] (per channel) or [1]
//   (a_per_row / b_per_row say which). This project's own kernel: 64 x 64 tiles
//   through shared memory, fp32 accumulation on CUDA cores (correct first; the
//   benchmark compares it with cuBLASLt's FP8 tensor-core GEMM).
struct Fp8GemmParams {
  const uint8_t* a = nullptr;
  const uint8_t* b = nullptr;
  const float* sa = nullptr;
  const float* sb = nullptr;
  bool a_per_row = false, b_per_row = false;
  float* c = nullptr;
  int m = 0, n = 0, k = 0;
  float beta = 0.0f;  // c = result + beta * c
};
cudaError_t launch_fp8_gemm(const Fp8GemmParams& p, cudaStream_t stream);

// Dynamic per-token FP8 quantization of activations: for each row of x
// [rows][cols] (bf16), scale[r] = max|x_r| / 448 (1 for an all-zero row) and
// codes[r][c] = e4m3(x[r][c] / scale[r]) (round to nearest even, saturating),
// as fp8_scales_per_row / quantize_fp8 do on the host.
cudaError_t launch_quantize_rows_fp8(const void* x_bf16, int rows, int cols, uint8_t* codes, float* scales,
                                     cudaStream_t stream);

}  // namespace testbed
