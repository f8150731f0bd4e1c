#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "kernels/gemm/quantize_ref.h"

namespace testbed {
namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void check_shapes(int n, int k, int samples, int group) {
  if (n <= 0 || k <= 0 || samples <= 0) throw std::invalid_argument("quantizer: empty weights or calibration data");
  if (group != 32 && group != 64 && group != 128) throw std::invalid_argument("quantizer: group must be 32, 64 or 128");
  if (k % group != 0) throw std::invalid_argument("quantizer: k must be a multiple of the group");
}

}  // namespace

W4Weights quantize_w4_gptq(const float* w, int n, int k, const float* x, int samples, int group, bool symmetric) {
  check_shapes(n, k, samples, group);
  // Scales and zeros from the weights as they are (static groups): RTN's.
  W4Weights q = quantize_w4_rtn(w, n, k, group, symmetric);
  std::fill(q.qweight.begin(), q.qweight.end(), 0u);
  const Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> X(x, samples, k);
  Mat H = 2.0 * X.cast<double>().transpose() * X.cast<double>();
  const double damp = 0.01 * H.diagonal().mean();
  // Columns that never see input (dead channels) get a unit diagonal and are simply rounded.
  for (int c = 0; c < k; ++c)
    if (H(c, c) == 0) H(c, c) = 1;
  H.diagonal().array() += damp;
  // Order: largest diagonal first (act-order).
  std::vector<int> perm(k);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return H(a, a) > H(b, b); });
  Mat Hp(k, k);
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < k; ++j) Hp(i, j) = H(perm[i], perm[j]);
  // Upper Cholesky factor of H^-1: its row j spreads column j's error over the later columns.
  const Mat Hinv = Hp.llt().solve(Mat::Identity(k, k));
  const Mat U = Hinv.llt().matrixU();
  Mat W(n, k);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < k; ++i) W(r, i) = w[static_cast<size_t>(r) * k + perm[i]];
  const int groups = k / group;
  Eigen::VectorXd err(n);
  for (int i = 0; i < k; ++i) {
    const int col = perm[i], g = col / group;
    const double d = U(i, i);
    for (int r = 0; r < n; ++r) {
      const size_t gi = static_cast<size_t>(r) * groups + g;
      const double s = q.scales[gi];
      const int zero = symmetric ? 8 : q.zeros[gi];
      const int code = std::clamp(static_cast<int>(std::nearbyint(W(r, i) / s)) + zero, 0, 15);
      q.qweight[static_cast<size_t>(r) * (k / 8) + col / 8] |= static_cast<uint32_t>(code) << (4 * (col % 8));
      err[r] = (W(r, i) - (code - zero) * s) / d;
    }
    // Spread this column's error over the columns not yet quantized: W[:, i+1:] -= err U[i, i+1:].
    if (i + 1 < k) W.rightCols(k - i - 1).noalias() -= err * U.row(i).tail(k - i - 1);
  }
  return q;
}

double layer_output_error(const float* w, const std::vector<float>& what, int n, int k, const float* x, int samples,
                          const std::vector<float>* input_scale) {
  double e = 0, ref = 0;
  for (int s = 0; s < samples; ++s)
    for (int r = 0; r < n; ++r) {
      double a = 0, b = 0;
      for (int c = 0; c < k; ++c) {
        const double xv = x[static_cast<size_t>(s) * k + c];
        a += xv * w[static_cast<size_t>(r) * k + c];
        b += (input_scale ? xv / (*input_scale)[c] : xv) * what[static_cast<size_t>(r) * k + c];
      }
      e += (a - b) * (a - b);
      ref += a * a;
    }
  return std::sqrt(e / std::max(ref, 1e-300));
}

AwqGroupResult quantize_w4_awq_group(const std::vector<const float*>& ws, const std::vector<int>& ns, int k,
                                     const float* x, int samples, int group, bool symmetric) {
  if (ws.empty() || ws.size() != ns.size()) throw std::invalid_argument("awq: one row count per weight");
  for (int n : ns) check_shapes(n, k, samples, group);
  std::vector<double> mean_abs(k, 0.0);
  for (int s = 0; s < samples; ++s)
    for (int c = 0; c < k; ++c) mean_abs[c] += std::abs(x[static_cast<size_t>(s) * k + c]) / samples;
  // The search scores each exponent on at most 256 of the calibration rows (the scales use all of them).
  const int eval_rows = std::min(samples, 256);
  AwqGroupResult best;
  double best_err = INFINITY;
  std::vector<float> scale(k), scaled;
  for (int step = 0; step < 20; ++step) {
    const double alpha = step / 20.0;  // 0: plain RTN
    double log_mean = 0;
    for (int c = 0; c < k; ++c) {
      scale[c] = static_cast<float>(std::pow(std::max(mean_abs[c], 1e-8), alpha));
      log_mean += std::log(scale[c]) / k;
    }
    for (int c = 0; c < k; ++c) scale[c] /= static_cast<float>(std::exp(log_mean));  // geometric mean 1
    std::vector<W4Weights> qs;
    double err = 0;
    for (size_t i = 0; i < ws.size(); ++i) {
      const int n = ns[i];
      scaled.resize(static_cast<size_t>(n) * k);
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < k; ++c) scaled[static_cast<size_t>(r) * k + c] = ws[i][static_cast<size_t>(r) * k + c] * scale[c];
      qs.push_back(quantize_w4_rtn(scaled.data(), n, k, group, symmetric));
      const double e = layer_output_error(ws[i], dequantize_w4(qs.back()), n, k, x, eval_rows, &scale);
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best.weights = std::move(qs);
      best.input_scale = scale;
      best.alpha = alpha;
    }
  }
  return best;
}

AwqResult quantize_w4_awq(const float* w, int n, int k, const float* x, int samples, int group, bool symmetric) {
  AwqGroupResult g = quantize_w4_awq_group({w}, {n}, k, x, samples, group, symmetric);
  AwqResult r;
  r.weights = std::move(g.weights[0]);
  r.input_scale = std::move(g.input_scale);
  r.alpha = g.alpha;
  return r;
}

}  // namespace testbed
