// The quantized GEMMs' CPU references and quantizers (kernels/gemm/gemm_ref.h):
// e4m3 codes against their definition, RTN's error bounds, group size and
// asymmetry doing what they should, and the references against a direct
// statement of their formulas.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/common/rng.h"
#include "kernels/gemm/gemm_ref.h"

using namespace testbed;

namespace {

std::vector<float> randn(Rng& rng, size_t n, double mean = 0, double sd = 1) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(mean + sd * rng.normal());
  return v;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) e += (a[i] - b[i]) * double(a[i] - b[i]), r += double(b[i]) * b[i];
  return std::sqrt(e / r);
}

std::vector<float> gemm(const std::vector<float>& a, const std::vector<float>& w, int m, int n, int k) {
  std::vector<float> c(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int t = 0; t < k; ++t) acc += double(a[i * k + t]) * w[j * k + t];
      c[i * n + j] = static_cast<float>(acc);
    }
  return c;
}

}  // namespace

TEST_CASE("e4m3 codes follow the OCP format: 3 mantissa bits, bias 7, max 448, saturating", "[gemm][fp8]") {
  CHECK(e4m3_to_float(0x38) == 1.0f);
  CHECK(e4m3_to_float(0x7E) == 448.0f);
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
  CHECK(e4m3_to_float(0x08) == std::ldexp(1.0f, -6));  // smallest normal
  CHECK(std::isnan(e4m3_to_float(0x7F)));
  CHECK(e4m3_to_float(0xB8) == -1.0f);
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    const float v = e4m3_to_float(static_cast<uint8_t>(c));
    INFO("code " << c);
    if (v == 0.0f) continue;  // +0 and -0
    CHECK(float_to_e4m3(v) == c);  // every finite code round-trips
  }
  CHECK(float_to_e4m3(1.0625f) == 0x38);  // halfway between 1 and 1.125: ties to the even code
  CHECK(float_to_e4m3(1.1875f) == 0x3A);  // halfway between 1.125 (odd) and 1.25 (even)
  CHECK(float_to_e4m3(1e6f) == 0x7E);     // saturates
  CHECK(float_to_e4m3(-1e6f) == 0xFE);
  CHECK(float_to_e4m3(std::nanf("")) == 0x7F);
}

TEST_CASE("RTN int4: codes in range, error within half a step, smaller groups and asymmetry help", "[gemm][w4]") {
  Rng rng(3);
  const int n = 64, k = 512;
  const std::vector<float> w = randn(rng, static_cast<size_t>(n) * k);
  for (const bool sym : {true, false})
    for (const int g : {32, 64, 128}) {
      INFO((sym ? "symmetric" : "asymmetric") << " group " << g);
      const W4Weights q = quantize_w4_rtn(w.data(), n, k, g, sym);
      CHECK(q.symmetric() == sym);
      const std::vector<float> d = dequantize_w4(q);
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < k; ++c) {
          const float s = q.scales[r * (k / g) + c / g];
          REQUIRE(std::abs(d[r * k + c] - w[r * k + c]) <= 0.5f * s * (1 + 1e-5f) + (sym ? 0.0f : 1e-6f));
        }
    }
  auto err = [&](const std::vector<float>& x, int g, bool sym) {
    return rel_l2(dequantize_w4(quantize_w4_rtn(x.data(), n, k, g, sym)), x);
  };
  CHECK(err(w, 32, true) < err(w, 64, true));
  CHECK(err(w, 64, true) < err(w, 128, true));
  // Skewed weights (all positive): the zero point uses all 16 codes, symmetric only 8.
  const std::vector<float> skewed = randn(rng, static_cast<size_t>(n) * k, 3.0, 1.0);
  CHECK(err(skewed, 128, false) < 0.6 * err(skewed, 128, true));
  CHECK_THROWS_AS(quantize_w4_rtn(w.data(), n, 100, 128, true), std::invalid_argument);
  CHECK_THROWS_AS(quantize_w4_rtn(w.data(), n, k, 48, true), std::invalid_argument);
}

TEST_CASE("the W4A16 and FP8 references compute their formulas", "[gemm]") {
  Rng rng(4);
  const int m = 5, n = 24, k = 256;
  const std::vector<float> a = randn(rng, static_cast<size_t>(m) * k), w = randn(rng, static_cast<size_t>(n) * k);
  // W4A16: the GEMM of the dequantized weights, and close to the full-precision product.
  const W4Weights q = quantize_w4_rtn(w.data(), n, k, 64, false);
  std::vector<float> c(static_cast<size_t>(m) * n);
  w4a16_gemm_ref(a.data(), m, q, c.data());
  const std::vector<float> direct = gemm(a, dequantize_w4(q), m, n, k), exact = gemm(a, w, m, n, k);
  CHECK(rel_l2(c, direct) < 1e-6);
  CHECK(rel_l2(c, exact) < 0.15);  // int4 at group 64 on normal weights: ~10%
  // FP8 with per-token and per-channel scales.
  const std::vector<float> sa = fp8_scales_per_row(a.data(), m, k), sb = fp8_scales_per_row(w.data(), n, k);
  const std::vector<uint8_t> qa = quantize_fp8(a.data(), m, k, sa), qb = quantize_fp8(w.data(), n, k, sb);
  std::vector<float> f(static_cast<size_t>(m) * n);
  fp8_gemm_ref(qa.data(), qb.data(), m, n, k, sa, sb, f.data());
  std::vector<float> da(a.size()), db(w.size());
  for (int i = 0; i < m; ++i)
    for (int t = 0; t < k; ++t) da[i * k + t] = e4m3_to_float(qa[i * k + t]) * sa[i];
  for (int j = 0; j < n; ++j)
    for (int t = 0; t < k; ++t) db[j * k + t] = e4m3_to_float(qb[j * k + t]) * sb[j];
  CHECK(rel_l2(f, gemm(da, db, m, n, k)) < 1e-6);
  CHECK(rel_l2(f, exact) < 0.06);  // 3 mantissa bits: a few per cent
  // Per-tensor scales: one scale each.
  const std::vector<float> ta{fp8_scale_from_amax(a.data(), a.size())}, tb{fp8_scale_from_amax(w.data(), w.size())};
  std::vector<float> t(static_cast<size_t>(m) * n);
  fp8_gemm_ref(quantize_fp8(a.data(), m, k, ta).data(), quantize_fp8(w.data(), n, k, tb).data(), m, n, k, ta, tb,
               t.data());
  CHECK(rel_l2(t, exact) < 0.08);
  CHECK_THROWS_AS(fp8_gemm_ref(qa.data(), qb.data(), m, n, k, {1, 2}, sb, f.data()), std::invalid_argument);
}
