// The quantized GEMM kernels (kernels/gemm/) against their CPU references
// over a grid of shapes: M 1 .. 256, K up to 8k, N up to 4k, groups 32/64/128,
// with and without zero points; FP8 per tensor and per token / channel.
// Outputs are poisoned with NaN first; NaN fails.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/common/rng.h"
#include "gpu_test_util.h"
#include "kernels/gemm/gemm.h"

using namespace testbed;
using namespace testbed::test;

namespace {

std::vector<float> randn(Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// mean |out - ref| / mean |ref|, and whether every output is finite.
double mean_rel(const std::vector<float>& out, const std::vector<float>& ref, bool* finite) {
  double e = 0, r = 0;
  *finite = true;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) *finite = false;
    e += std::abs(out[i] - ref[i]);
    r += std::abs(ref[i]);
  }
  return e / r;
}

}  // namespace

TEST_CASE("the W4A16 kernel matches the dequantized reference", "[gpu][gemm][w4]") {
  Rng rng(13);
  struct Shape {
    int m, n, k;
  };
  for (const Shape s : {Shape{1, 64, 256}, Shape{7, 96, 512}, Shape{16, 4096, 4096}, Shape{33, 256, 8192},
                        Shape{64, 1000, 1024}, Shape{256, 128, 768}})
    for (const int group : {32, 64, 128})
      for (const bool sym : {true, false})
        for (const DType dtype : {DType::kBF16, DType::kFP16}) {
          if (s.k % group != 0) continue;
          INFO("M " << s.m << " N " << s.n << " K " << s.k << " group " << group << (sym ? " sym " : " asym ")
                    << dtype_name(dtype));
          const std::vector<float> w = randn(rng, static_cast<size_t>(s.n) * s.k);
          W4Weights q = quantize_w4_rtn(w.data(), s.n, s.k, group, sym);
          q.scales = round_to(q.scales, dtype);  // the kernel reads 16-bit scales
          const std::vector<float> a = round_to(randn(rng, static_cast<size_t>(s.m) * s.k), dtype);
          std::vector<float> ref(static_cast<size_t>(s.m) * s.n);
          w4a16_gemm_ref(a.data(), s.m, q, ref.data());
          DeviceBuffer da = upload_as(a, dtype), dscales = upload_as(q.scales, dtype), dq, dz;
          dq.upload(q.qweight);
          if (!sym) dz.upload(q.zeros);
          DeviceBuffer dc = poisoned(ref.size(), DType::kFP32);
          W4A16Params p;
          p.dtype = dtype;
          p.a = da.get();
          p.qweight = dq.as<uint32_t>();
          p.scales = dscales.get();
          p.zeros = sym ? nullptr : dz.as<uint8_t>();
          p.c = dc.as<float>();
          p.m = s.m;
          p.n = s.n;
          p.k = s.k;
          p.group = group;
          REQUIRE_LAUNCH(launch_w4a16_gemm(p, nullptr));
          bool finite = false;
          const double err = mean_rel(dc.download<float>(ref.size()), ref, &finite);
          CHECK(finite);
          CHECK(err < 1e-3);
        }
  W4A16Params bad;
  bad.m = bad.n = 1;
  bad.k = 200;  // not a multiple of 256
  CHECK(launch_w4a16_gemm(bad, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("the FP8 kernel matches the fp32 reference of its scaled inputs", "[gpu][gemm][fp8]") {
  Rng rng(17);
  struct Shape {
    int m, n, k;
  };
  for (const Shape s : {Shape{1, 64, 64}, Shape{13, 77, 100}, Shape{128, 256, 4096}, Shape{200, 1024, 1024}})
    for (const bool per_row : {false, true}) {
      INFO("M " << s.m << " N " << s.n << " K " << s.k << (per_row ? " per token / channel" : " per tensor"));
      const std::vector<float> a = randn(rng, static_cast<size_t>(s.m) * s.k), b = randn(rng, static_cast<size_t>(s.n) * s.k);
      const std::vector<float> sa = per_row ? fp8_scales_per_row(a.data(), s.m, s.k)
                                            : std::vector<float>{fp8_scale_from_amax(a.data(), a.size())};
      const std::vector<float> sb = per_row ? fp8_scales_per_row(b.data(), s.n, s.k)
                                            : std::vector<float>{fp8_scale_from_amax(b.data(), b.size())};
      const std::vector<uint8_t> qa = quantize_fp8(a.data(), s.m, s.k, sa), qb = quantize_fp8(b.data(), s.n, s.k, sb);
      std::vector<float> ref(static_cast<size_t>(s.m) * s.n);
      fp8_gemm_ref(qa.data(), qb.data(), s.m, s.n, s.k, sa, sb, ref.data());
      DeviceBuffer dqa, dqb, dsa, dsb;
      dqa.upload(qa);
      dqb.upload(qb);
      dsa.upload(sa);
      dsb.upload(sb);
      DeviceBuffer dc = poisoned(ref.size(), DType::kFP32);
      Fp8GemmParams p;
      p.a = dqa.as<uint8_t>();
      p.b = dqb.as<uint8_t>();
      p.sa = dsa.as<float>();
      p.sb = dsb.as<float>();
      p.a_per_row = p.b_per_row = per_row;
      p.c = dc.as<float>();
      p.m = s.m;
      p.n = s.n;
      p.k = s.k;
      REQUIRE_LAUNCH(launch_fp8_gemm(p, nullptr));
      const std::vector<float> out = dc.download<float>(ref.size());
      size_t bad = 0;
      for (size_t i = 0; i < out.size(); ++i)
        if (!(std::abs(out[i] - ref[i]) <= 1e-2 * std::abs(ref[i]) + 1e-3)) ++bad;
      CHECK(bad == 0);
    }
}

TEST_CASE("per-token FP8 quantization on the device matches the host's", "[gpu][gemm][fp8]") {
  Rng rng(19);
  for (const int cols : {1, 100, 4096}) {
    const int rows = 37;
    INFO("cols " << cols);
    std::vector<float> x = round_to(randn(rng, static_cast<size_t>(rows) * cols), DType::kBF16);
    for (int c = 0; c < cols; ++c) x[c] = 0.0f;  // an all-zero row: scale 1
    const std::vector<float> s = fp8_scales_per_row(x.data(), rows, cols);
    const std::vector<uint8_t> q = quantize_fp8(x.data(), rows, cols, s);
    DeviceBuffer dx = upload_as(x, DType::kBF16), codes(static_cast<size_t>(rows) * cols), scales(sizeof(float) * rows);
    cuda_check(cudaMemset(codes.get(), 0x7F, codes.bytes()), "poison");  // NaN codes
    REQUIRE_LAUNCH(launch_quantize_rows_fp8(dx.get(), rows, cols, codes.as<uint8_t>(), scales.as<float>(), nullptr));
    CHECK(scales.download<float>(rows) == s);
    const std::vector<uint8_t> got = codes.download<uint8_t>(static_cast<size_t>(rows) * cols);
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != q[i];
    CHECK(differ == 0);  // both round to nearest even from the same float quotient
  }
}
