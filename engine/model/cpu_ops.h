// The CPU executor's building blocks. All of them are batch-invariant: a token's
// result depends only on that token's inputs, never on how many other tokens
// share the call or where it sits among them. That is what makes generated
// tokens identical with prefix caching, chunked prefill and preemption on or off.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/tensor.h"

namespace testbed {

// Y[T, N] = X[T, K] * W[N, K]^T. Rows go through Eigen's GEMM in fixed tiles of
// kLinearTileRows (the last one zero-padded): Eigen's blocking depends on the
// matrix shape, so a fixed shape is what keeps each row's sums in one order.
constexpr int kLinearTileRows = 32;
void linear(const float* x, int num_rows, const Tensor& w, float* y);

// y = x / sqrt(mean(x^2) + eps) * weight, per row of `dim` values (in place allowed).
void rms_norm(const float* x, const float* weight, int num_rows, int dim, float eps, float* y);

// out = silu(gate) * up, elementwise.
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// Rotary embedding tables (Hugging Face's rotate-half convention), with Llama 3 scaling.
class RopeTable {
 public:
  RopeTable(const ModelConfig& cfg, int max_positions);
  // Rotates `num_heads` heads of `head_dim` values at `position`, in place.
  void apply(float* heads, int num_heads, int position) const;
  int max_positions() const { return max_positions_; }

 private:
  int half_ = 0, max_positions_ = 0;
  std::vector<float> cos_, sin_;  // [max_positions, head_dim / 2]
};

// Inverse frequencies of the rotary embedding, after rope_scaling (double precision).
std::vector<double> rope_inverse_frequencies(const ModelConfig& cfg);

}  // namespace testbed
