#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/gemm/gemm_ref.h"

namespace testbed {

float W4Weights::dequant(int row, int col) const {
  const size_t g = static_cast<size_t>(row) * (k / group) + col / group;
  const int zero = symmetric() ? 8 : zeros[g];
  return static_cast<float>(code(row, col) - zero) * scales[g];
}

W4Weights quantize_w4_rtn(const float* w, int n, int k, int group, bool symmetric) {
  if (group != 32 && group != 64 && group != 128) throw std::invalid_argument("w4: group must be 32, 64 or 128");
  if (n <= 0 || k <= 0 || k % group != 0)
    throw std::invalid_argument("w4: k (" + std::to_string(k) + ") must be a positive multiple of the group");
  W4Weights q;
  q.n = n;
  q.k = k;
  q.group = group;
  const int groups = k / group;
  q.qweight.assign(static_cast<size_t>(n) * (k / 8), 0u);
  q.scales.assign(static_cast<size_t>(n) * groups, 0.0f);
  if (!symmetric) q.zeros.assign(static_cast<size_t>(n) * groups, 0);
  for (int r = 0; r < n; ++r)
    for (int g = 0; g < groups; ++g) {
      const float* x = w + static_cast<size_t>(r) * k + static_cast<size_t>(g) * group;
      float lo = x[0], hi = x[0], amax = 0;
      for (int i = 0; i < group; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]), amax = std::max(amax, std::abs(x[i]));
      float scale;
      int zero;
      if (symmetric) {
        scale = amax > 0 ? amax / 7.0f : 1.0f;
        zero = 8;
      } else {
        lo = std::min(lo, 0.0f);  // zero stays representable
        hi = std::max(hi, 0.0f);
        scale = hi > lo ? (hi - lo) / 15.0f : 1.0f;
        zero = std::clamp(static_cast<int>(std::nearbyint(-lo / scale)), 0, 15);
        q.zeros[static_cast<size_t>(r) * groups + g] = static_cast<uint8_t>(zero);
      }
      q.scales[static_cast<size_t>(r) * groups + g] = scale;
      for (int i = 0; i < group; ++i) {
        const int col = g * group + i;
        const int code = std::clamp(static_cast<int>(std::nearbyint(x[i] / scale)) + zero, 0, 15);
        q.qweight[static_cast<size_t>(r) * (k / 8) + col / 8] |= static_cast<uint32_t>(code) << (4 * (col % 8));
      }
    }
  return q;
}

std::vector<float> dequantize_w4(const W4Weights& q) {
  std::vector<float> w(static_cast<size_t>(q.n) * q.k);
  for (int r = 0; r < q.n; ++r)
    for (int c = 0; c < q.k; ++c) w[static_cast<size_t>(r) * q.k + c] = q.dequant(r, c);
  return w;
}

void w4a16_gemm_ref(const float* a, int m, const W4Weights& w, float* c) {
  const std::vector<float> d = dequantize_w4(w);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < w.n; ++j) {
      double acc = 0;
      for (int t = 0; t < w.k; ++t) acc += static_cast<double>(a[static_cast<size_t>(i) * w.k + t]) * d[static_cast<size_t>(j) * w.k + t];
      c[static_cast<size_t>(i) * w.n + j] = static_cast<float>(acc);
    }
}

float e4m3_to_float(uint8_t code) {
  const int sign = code >> 7, exp = (code >> 3) & 0xF, mant = code & 0x7;
  if (exp == 0xF && mant == 0x7) return std::nanf("");
  float v = exp == 0 ? std::ldexp(static_cast<float>(mant) / 8.0f, -6) : std::ldexp(1.0f + mant / 8.0f, exp - 7);
  return sign ? -v : v;
}

uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::min(std::abs(f), 448.0f);  // saturate
  // The nearest of the 127 finite magnitudes, ties to the even code: a table walk is exact and small.
  uint8_t best = 0;
  float best_err = a;
  for (uint8_t c = 1; c <= 0x7E; ++c) {
    const float v = e4m3_to_float(c), err = std::abs(v - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) best = c, best_err = err;
  }
  return static_cast<uint8_t>(sign | best);
}

float fp8_scale_from_amax(const float* x, size_t count) {
  float amax = 0;
  for (size_t i = 0; i < count; ++i) amax = std::max(amax, std::abs(x[i]));
  return amax > 0 ? amax / 448.0f : 1.0f;
}

std::vector<float> fp8_scales_per_row(const float* x, int rows, int cols) {
  std::vector<float> s(rows);
  for (int r = 0; r < rows; ++r) s[r] = fp8_scale_from_amax(x + static_cast<size_t>(r) * cols, cols);
  return s;
}

std::vector<uint8_t> quantize_fp8(const float* x, int rows, int cols, const std::vector<float>& scales) {
  if (scales.size() != 1 && scales.size() != static_cast<size_t>(rows))
    throw std::invalid_argument("fp8: one scale, or one per row");
  std::vector<uint8_t> q(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    const float s = scales.size() == 1 ? scales[0] : scales[r];
    for (int c = 0; c < cols; ++c) q[static_cast<size_t>(r) * cols + c] = float_to_e4m3(x[static_cast<size_t>(r) * cols + c] / s);
  }
  return q;
}

void fp8_gemm_ref(const uint8_t* a, const uint8_t* b, int m, int n, int k, const std::vector<float>& sa,
                  const std::vector<float>& sb, float* c) {
  if ((sa.size() != 1 && sa.size() != static_cast<size_t>(m)) || (sb.size() != 1 && sb.size() != static_cast<size_t>(n)))
    throw std::invalid_argument("fp8 gemm: scales must be per tensor or per row");
  std::vector<float> ta(256);
  for (int i = 0; i < 256; ++i) ta[i] = e4m3_to_float(static_cast<uint8_t>(i));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int t = 0; t < k; ++t) acc += static_cast<double>(ta[a[static_cast<size_t>(i) * k + t]]) * ta[b[static_cast<size_t>(j) * k + t]];
      c[static_cast<size_t>(i) * n + j] =
          static_cast<float>(acc * (sa.size() == 1 ? sa[0] : sa[i]) * (sb.size() == 1 ? sb[0] : sb[j]));
    }
}

}  // namespace testbed
