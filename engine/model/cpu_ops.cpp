#include "engine/model/cpu_ops.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>

namespace testbed {
namespace {
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}

void linear(const float* x, int num_rows, const Tensor& w, float* y) {
  const int n = static_cast<int>(w.rows()), k = static_cast<int>(w.cols());
  Eigen::Map<const RowMat> wm(w.data.data(), n, k);
  RowMat xin(kLinearTileRows, k), yout(kLinearTileRows, n);
  for (int r = 0; r < num_rows; r += kLinearTileRows) {
    const int rows = std::min(kLinearTileRows, num_rows - r);
    if (rows == kLinearTileRows) {
      Eigen::Map<const RowMat> xt(x + static_cast<size_t>(r) * k, rows, k);
      Eigen::Map<RowMat> yt(y + static_cast<size_t>(r) * n, rows, n);
      yt.noalias() = xt * wm.transpose();
    } else {
      xin.setZero();
      std::memcpy(xin.data(), x + static_cast<size_t>(r) * k, sizeof(float) * rows * k);
      yout.noalias() = xin * wm.transpose();
      std::memcpy(y + static_cast<size_t>(r) * n, yout.data(), sizeof(float) * rows * n);
    }
  }
}

void rms_norm(const float* x, const float* weight, int num_rows, int dim, float eps, float* y) {
  for (int r = 0; r < num_rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * dim;
    float* yr = y + static_cast<size_t>(r) * dim;
    float ss = 0.0f;
    for (int i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * inv);
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

std::vector<double> rope_inverse_frequencies(const ModelConfig& cfg) {
  const int half = cfg.head_dim / 2;
  std::vector<double> inv(half);
  for (int i = 0; i < half; ++i) inv[i] = std::pow(cfg.rope_theta, -2.0 * i / cfg.head_dim);
  const RopeScaling& rs = cfg.rope_scaling;
  if (rs.type == "llama3") {
    const double old_len = rs.original_max_position_embeddings;
    const double low_wavelen = old_len / rs.low_freq_factor, high_wavelen = old_len / rs.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= rs.factor;
      } else {
        const double smooth = (old_len / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        f = (1.0 - smooth) * f / rs.factor + smooth * f;
      }
    }
  }
  return inv;
}

RopeTable::RopeTable(const ModelConfig& cfg, int max_positions)
    : half_(cfg.head_dim / 2), max_positions_(max_positions) {
  const std::vector<double> inv = rope_inverse_frequencies(cfg);
  cos_.resize(static_cast<size_t>(max_positions) * half_);
  sin_.resize(cos_.size());
  for (int p = 0; p < max_positions; ++p)
    for (int i = 0; i < half_; ++i) {
      const double angle = p * inv[i];
      cos_[static_cast<size_t>(p) * half_ + i] = static_cast<float>(std::cos(angle));
      sin_[static_cast<size_t>(p) * half_ + i] = static_cast<float>(std::sin(angle));
    }
}

void RopeTable::apply(float* heads, int num_heads, int position) const {
  const float* c = cos_.data() + static_cast<size_t>(position) * half_;
  const float* s = sin_.data() + static_cast<size_t>(position) * half_;
  for (int h = 0; h < num_heads; ++h) {
    float* x = heads + static_cast<size_t>(h) * 2 * half_;
    for (int i = 0; i < half_; ++i) {
      const float a = x[i], b = x[i + half_];
      x[i] = a * c[i] - b * s[i];
      x[i + half_] = b * c[i] + a * s[i];
    }
  }
}

}  // namespace testbed
