// Quantized GEMMs' layouts, their CPU references and the quantizers that make
// their inputs (the CUDA kernels are declared in kernels/gemm/gemm.h).
//
// W4A16: C[M, N] = A[M, K] * dequant(W)[N, K]^T, A 16-bit, accumulation and C fp32.
//   qweight [N][K / 8] uint32   eight 4-bit codes per word along K: code of k is
//                               bits 4 (k % 8) .. 4 (k % 8) + 3 of word k / 8
//   scales  [N][K / g]  float   per group of g weights along K (stored 16-bit on the GPU)
//   zeros   [N][K / g]  uint8   per group, in [0, 15]; null: symmetric, zero point 8
//   dequant(W)[n][k] = (code - zero) * scale, g = 32, 64 or 128, K a multiple of g.
// FP8 (e4m3, OCP: 1 sign, 4 exponent bits of bias 7, 3 mantissa bits, max 448, no
// infinities): C[m][n] = sa[m or 0] * sb[n or 0] * sum_k A[m][k] B[n][k] with A
//   [M, K] and B [N, K] e4m3 codes and per-tensor or per-token (A) / per-channel
//   (B) fp32 scales; accumulation and C fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace testbed {

struct W4Weights {
  int n = 0, k = 0, group = 128;
  std::vector<uint32_t> qweight;  // [n][k / 8]
  std::vector<float> scales;      // [n][k / group]
  std::vector<uint8_t> zeros;     // [n][k / group], empty when symmetric
  bool symmetric() const { return zeros.empty(); }
  int code(int row, int col) const { return (qweight[static_cast<size_t>(row) * (k / 8) + col / 8] >> (4 * (col % 8))) & 0xF; }
  float dequant(int row, int col) const;
};

// Round-to-nearest group-wise quantization of W [n][k] (row-major): symmetric
// (scale max|w| / 7, zero 8) or asymmetric (scale (max - min) / 15, zero
// round(-min / scale)). Throws std::invalid_argument for k not a multiple of
// the group or a group other than 32, 64, 128.
W4Weights quantize_w4_rtn(const float* w, int n, int k, int group, bool symmetric);
// The dequantized weights [n][k].
std::vector<float> dequantize_w4(const W4Weights& q);
// C[m][n] = sum_k a[m][k] * dequant(W)[n][k] (a as the kernel reads it, e.g. bf16-rounded), fp32.
void w4a16_gemm_ref(const float* a, int m, const W4Weights& w, float* c);

// e4m3 codes: round to nearest even, saturating at +-448; NaN stays NaN (0x7F).
uint8_t float_to_e4m3(float f);
float e4m3_to_float(uint8_t code);
// The scale that maps amax to 448 (1 for an all-zero input): x / scale fits e4m3.
float fp8_scale_from_amax(const float* x, size_t count);
// Per row of [rows][cols]: one scale per row (per channel of a weight, per token of an activation).
std::vector<float> fp8_scales_per_row(const float* x, int rows, int cols);
// codes[i] = float_to_e4m3(x[i] / scale of its row (one scale for all when per_row is false)).
std::vector<uint8_t> quantize_fp8(const float* x, int rows, int cols, const std::vector<float>& scales);
// C[m][n] = sa[m] sb[n] sum_k e4m3(A[m][k]) e4m3(B[n][k]); sa / sb of size 1 are per tensor.
void fp8_gemm_ref(const uint8_t* a, const uint8_t* b, int m, int n, int k, const std::vector<float>& sa,
                  const std::vector<float>& sb, float* c);

}  // namespace testbed
