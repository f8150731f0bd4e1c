// Error-compensating int4 quantizers on the CPU, producing the W4A16 layout of
// kernels/gemm/gemm_ref.h (groups along K in column order).
//
// GPTQ (Frantar et al., ICLR 2023): with H = 2 X^T X of calibration inputs X
// [S, K] (damped by 1% of its mean diagonal), columns are quantized one at a
// time in the order of H's diagonal, largest first, and each one's error is
// spread over the columns not yet quantized through the Cholesky factor of
// H^-1, so the layer's output X W^T changes least. Group scales and zeros
// are fixed up front from the weights (static groups), so the result keeps
// the plain column-order layout the kernel reads.
//
// AWQ (Lin et al., MLSys 2024): a per-input-channel scale s_c = mean|X_c|^a
// protects the channels with large activations; a in [0, 1] is searched on a
// grid of 20 for the smallest output error of RTN on W diag(s). The result is
// the quantized W diag(s) and s: the layer computes (x / s) W'^T.
#pragma once

#include <vector>

#include "kernels/gemm/gemm_ref.h"

namespace testbed {

// w [n][k] row-major (out x in features), x [samples][k]. Throws std::invalid_argument for bad shapes.
W4Weights quantize_w4_gptq(const float* w, int n, int k, const float* x, int samples, int group, bool symmetric);

struct AwqResult {
  W4Weights weights;           // RTN of w * diag(input_scale)
  std::vector<float> input_scale;  // [k]: divide the layer's input by it
  double alpha = 0;            // the exponent found
};
AwqResult quantize_w4_awq(const float* w, int n, int k, const float* x, int samples, int group, bool symmetric);
// AWQ for several linears that read the same input (q, k, v; gate, up): one
// scale searched for their summed output error, as AWQ scales a layer group.
// ws[i] is [ns[i]][k]; returns one W4Weights per linear, in order.
struct AwqGroupResult {
  std::vector<W4Weights> weights;
  std::vector<float> input_scale;
  double alpha = 0;
};
AwqGroupResult quantize_w4_awq_group(const std::vector<const float*>& ws, const std::vector<int>& ns, int k,
                                     const float* x, int samples, int group, bool symmetric);

// || x w^T - x_eff what^T ||_F / || x w^T ||_F: a quantizer's output error on inputs x [samples][k]
// (what [n][k] dequantized; input_scale, when given, divides x first, as AWQ's layer does).
double layer_output_error(const float* w, const std::vector<float>& what, int n, int k, const float* x, int samples,
                          const std::vector<float>* input_scale = nullptr);

}  // namespace testbed
