// bench_gemm: the quantized GEMM kernels on the GPU against cuBLAS.
//
//   build/kernels/bench_gemm --benchmark_min_time=0.05 --profile_dir=results/profile
//
// W4A16 (group 128, asymmetric) at decode sizes M = 1 .. 64 against cuBLAS's
// bf16 GEMM of the same shape (goal: >= 3.5x at M <= 16 on 8k x 8k and up;
// ideal 16 / (4 + 16/g) = 3.88x); this project's FP8 kernel against
// cuBLASLt's FP8 tensor-core GEMM (goal: >= 90%). Inputs are random (device
// fill, kernels/common/fill.h); each W4A16 and FP8 result is checked against
// the same-shape baseline's, relative L2 within 2%, or the row is an error.
// Writes --profile_dir/gemm_profile.csv (kernel,m,n,k,time_us,tflops,gbps,
// vs_baseline) row by row. Without a GPU: "SKIP: ..." and exit 77.
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/common/rng.h"
#include "kernels/common/bench_util.h"
#include "kernels/common/device_buffer.h"
#include "kernels/common/model_ops.h"
#include "kernels/gemm/gemm.h"

namespace testbed::bench {
namespace {

GpuTimer* g_timer = nullptr;
cublasHandle_t g_cublas = nullptr;
cublasLtHandle_t g_lt = nullptr;
ProfileTable g_table("kernel,m,n,k,time_us,tflops,gbps,vs_baseline");
std::map<std::string, double> g_baseline_s;  // "m,n,k" -> cuBLAS seconds

std::string key(int m, int n, int k) { return format("%d,%d,%d", m, n, k); }

// C[M,N] (fp32) = A[M,K] (bf16) * W[N,K]^T (bf16), cuBLAS column-major: C^T = W A^T.
cublasStatus_t bf16_gemm(const void* a, const void* w, float* c, int m, int n, int k, cudaStream_t s) {
  cublasSetStream(g_cublas, s);
  const float one = 1.0f, zero = 0.0f;
  return cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_16BF, k, a, CUDA_R_16BF, k, &zero, c,
                      CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cudaError_t from_cublas(cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown; }

double rel_l2(const DeviceBuffer& x, const DeviceBuffer& y, size_t n) {
  const std::vector<float> a = x.download<float>(n), b = y.download<float>(n);
  double e = 0, r = 0;
  for (size_t i = 0; i < n; ++i) e += (a[i] - b[i]) * double(a[i] - b[i]), r += double(b[i]) * b[i];
  return std::sqrt(e / std::max(r, 1e-30));
}

void record(benchmark::State& state, const char* kernel, int m, int n, int k, double sec, double bytes) {
  const double tflops = 2.0 * m * n * k / sec * 1e-12, gbps = bytes / sec * 1e-9;
  const auto base = g_baseline_s.find(key(m, n, k));
  const double vs = base != g_baseline_s.end() ? base->second / sec : 0.0;
  state.counters["TFLOPs"] = tflops;
  state.counters["GBps"] = gbps;
  if (vs > 0) state.counters["x_baseline"] = vs;
  g_table.set(format("%s/%d/%d/%d", kernel, m, n, k), format("%s,%d,%d,%d,%.3f,%.2f,%.1f,%.3f", kernel, m, n, k,
                                                             sec * 1e6, tflops, gbps, vs));
}

void bm_bf16(benchmark::State& state, int m, int n, int k) {
  DeviceBuffer a(size_t(m) * k * 2), w(size_t(n) * k * 2), c(size_t(m) * n * 4);
  cuda_check(launch_fill_uniform(a.get(), size_t(m) * k, DType::kBF16, -1, 1, 1, nullptr), "fill");
  cuda_check(launch_fill_uniform(w.get(), size_t(n) * k, DType::kBF16, -1, 1, 2, nullptr), "fill");
  const double sec = g_timer->run(state, [&] {
    return from_cublas(bf16_gemm(a.get(), w.get(), c.as<float>(), m, n, k, g_timer->stream()));
  });
  if (state.error_occurred()) return;
  g_baseline_s[key(m, n, k)] = sec;
  record(state, "cublas_bf16", m, n, k, sec, 2.0 * (double(n) * k + double(m) * k) + 4.0 * m * n);
}

void bm_w4a16(benchmark::State& state, int m, int n, int k) {
  const int g = 128;
  // Random codes, zero points and scales: a weight the bf16 baseline can also be given.
  DeviceBuffer a(size_t(m) * k * 2), q(size_t(n) * k / 2), s(size_t(n) * (k / g) * 2), z(size_t(n) * (k / g)),
      c(size_t(m) * n * 4), cw(size_t(n) * k * 2), cref(size_t(m) * n * 4);
  cuda_check(launch_fill_uniform(a.get(), size_t(m) * k, DType::kBF16, -1, 1, 1, nullptr), "fill");
  std::vector<uint32_t> hq(size_t(n) * k / 8);
  std::vector<uint8_t> hz(size_t(n) * (k / g));
  Rng rng(3);
  for (auto& x : hq) x = static_cast<uint32_t>(rng.next_u64());
  for (auto& x : hz) x = static_cast<uint8_t>(rng.below(16));
  q.upload(hq);
  z.upload(hz);
  std::vector<uint16_t> hs(size_t(n) * (k / g), 0x3C00);  // bf16 0.0078125 (2^-7)
  s.upload(hs);
  W4A16Params p;
  p.a = a.get();
  p.qweight = q.as<uint32_t>();
  p.scales = s.get();
  p.zeros = z.as<uint8_t>();
  p.c = c.as<float>();
  p.m = m;
  p.n = n;
  p.k = k;
  p.group = g;
  const double sec = g_timer->run(state, [&] { return launch_w4a16_gemm(p, g_timer->stream()); });
  if (state.error_occurred()) return;
  // The check: the same weights dequantized on the host, through cuBLAS bf16.
  std::vector<uint16_t> dw(size_t(n) * k);
  for (int r = 0; r < n; ++r)
    for (int col = 0; col < k; ++col) {
      const int code = (hq[size_t(r) * (k / 8) + col / 8] >> (4 * (col % 8))) & 0xF;
      const float v = (code - hz[size_t(r) * (k / g) + col / g]) * 0.0078125f;  // exact in bf16
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      dw[size_t(r) * k + col] = static_cast<uint16_t>(bits >> 16);
    }
  cw.upload(dw);
  if (bf16_gemm(a.get(), cw.get(), cref.as<float>(), m, n, k, nullptr) != CUBLAS_STATUS_SUCCESS ||
      cudaDeviceSynchronize() != cudaSuccess) {
    state.SkipWithError("cuBLAS check GEMM failed");
    return;
  }
  const double err = rel_l2(c, cref, size_t(m) * n);
  if (!(err <= 2e-2)) {
    state.SkipWithError(format("output check: relative L2 %.3g against cuBLAS on the dequantized weights", err).c_str());
    return;
  }
  record(state, "w4a16", m, n, k, sec, double(n) * k / 2 + 2.0 * n * (k / g) + n * (k / g) + 2.0 * m * k + 4.0 * m * n);
}

// cuBLASLt FP8: D[M,N] = sa * sb * A[M,K] B[N,K]^T, e4m3 inputs (the TN layout FP8 requires), fp32 out.
struct LtFp8 {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t heur{};
  DeviceBuffer ws;
  bool ok = false;
  LtFp8(int m, int n, int k, const float* sa, const float* sb) : ws(32 << 20) {
    // Column-major view: D^T[N,M] = B[N,K] * A^T: "A" of cuBLAS is our B (transposed), "B" is our A.
    const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa);
    if (cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, n, k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, m, k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, n) != CUBLAS_STATUS_SUCCESS)
      return;
    cublasLtMatmulPreferenceCreate(&pref);
    size_t bytes = ws.bytes();
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
    int found = 0;
    ok = cublasLtMatmulAlgoGetHeuristic(g_lt, op, la, lb, lc, lc, pref, 1, &heur, &found) == CUBLAS_STATUS_SUCCESS &&
         found > 0;
  }
  ~LtFp8() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
  }
  cublasStatus_t run(const void* a, const void* b, float* c, cudaStream_t s) {
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(g_lt, op, &one, b, la, a, lb, &zero, c, lc, c, lc, &heur.algo, ws.get(), ws.bytes(), s);
  }
};

void bm_fp8(benchmark::State& state, int m, int n, int k, bool ours) {
  DeviceBuffer a(size_t(m) * k), b(size_t(n) * k), c(size_t(m) * n * 4), sa, sb;
  std::vector<uint8_t> ha(size_t(m) * k), hb(size_t(n) * k);
  Rng rng(5);
  for (auto& x : ha) x = static_cast<uint8_t>(rng.below(0x70)) | (rng.below(2) ? 0x80 : 0);  // finite, |x| < 256
  for (auto& x : hb) x = static_cast<uint8_t>(rng.below(0x70)) | (rng.below(2) ? 0x80 : 0);
  a.upload(ha);
  b.upload(hb);
  sa.upload(std::vector<float>{1.0f / 64});
  sb.upload(std::vector<float>{1.0f / 64});
  double sec = 0;
  if (ours) {
    Fp8GemmParams p;
    p.a = a.as<uint8_t>();
    p.b = b.as<uint8_t>();
    p.sa = sa.as<float>();
    p.sb = sb.as<float>();
    p.c = c.as<float>();
    p.m = m;
    p.n = n;
    p.k = k;
    sec = g_timer->run(state, [&] { return launch_fp8_gemm(p, g_timer->stream()); });
    if (state.error_occurred()) return;
    // The check: cuBLASLt on the same codes, when it runs.
    LtFp8 lt(m, n, k, sa.as<float>(), sb.as<float>());
    DeviceBuffer cref(size_t(m) * n * 4);
    if (lt.ok && lt.run(a.get(), b.get(), cref.as<float>(), nullptr) == CUBLAS_STATUS_SUCCESS &&
        cudaDeviceSynchronize() == cudaSuccess) {
      const double err = rel_l2(c, cref, size_t(m) * n);
      if (!(err <= 2e-2)) {
        state.SkipWithError(format("output check: relative L2 %.3g against cuBLASLt", err).c_str());
        return;
      }
    }
    record(state, "fp8_ours", m, n, k, sec, double(m) * k + double(n) * k + 4.0 * m * n);
  } else {
    LtFp8 lt(m, n, k, sa.as<float>(), sb.as<float>());
    if (!lt.ok) {
      state.SkipWithError("cuBLASLt found no FP8 algorithm for this shape");
      return;
    }
    sec = g_timer->run(state, [&] { return from_cublas(lt.run(a.get(), b.get(), c.as<float>(), g_timer->stream())); });
    if (state.error_occurred()) return;
    g_baseline_s[key(m, n, k)] = sec;
    record(state, "cublaslt_fp8", m, n, k, sec, double(m) * k + double(n) * k + 4.0 * m * n);
  }
}

void register_all() {
  auto reg = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(),
                                 [fn](benchmark::State& st) {
                                   try {
                                     fn(st);
                                   } catch (const std::exception& e) {
                                     st.SkipWithError(e.what());
                                   }
                                 })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  };
  // W4A16 against bf16 at decode sizes; the baseline runs first so the ratio is known.
  for (const int nk : {4096, 8192})
    for (const int m : {1, 4, 16, 64}) {
      reg(format("cublas_bf16/M%d/N%d/K%d", m, nk, nk), [=](benchmark::State& s) { bm_bf16(s, m, nk, nk); });
      reg(format("w4a16/M%d/N%d/K%d", m, nk, nk), [=](benchmark::State& s) { bm_w4a16(s, m, nk, nk); });
    }
  // FP8: cuBLASLt first, then ours, at prefill sizes.
  for (const int mnk : {2048, 4096, 8192}) {
    reg(format("cublaslt_fp8/%d", mnk), [=](benchmark::State& s) { bm_fp8(s, mnk, mnk, mnk, false); });
    reg(format("fp8_ours/%d", mnk), [=](benchmark::State& s) { bm_fp8(s, mnk, mnk, mnk, true); });
  }
}

}  // namespace
}  // namespace testbed::bench

int main(int argc, char** argv) {
  using namespace testbed::bench;
  std::string profile_dir;
  if (const int rc = start_benchmarks("bench_gemm", argc, argv, profile_dir)) return rc;
  GpuTimer timer;
  g_timer = &timer;
  if (cublasCreate(&g_cublas) != CUBLAS_STATUS_SUCCESS || cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cuBLAS handles could not be created\n");
    return 1;
  }
  g_table.stream_to(profile_dir + "/gemm_profile.csv");
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  cublasLtDestroy(g_lt);
  cublasDestroy(g_cublas);
  const bool ok = g_table.write(profile_dir + "/gemm_profile.csv");
  std::printf("profile %s %s/gemm_profile.csv\n", ok ? "written to" : "NOT written to", profile_dir.c_str());
  return ok ? 0 : 1;
}
