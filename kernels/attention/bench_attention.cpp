// bench_attention: Google Benchmark driver of the attention kernels on the GPU.
//
//   build/kernels/bench_attention --benchmark_min_time=0.05 --profile_dir=results/profile
//
// Inputs are random in [-1, 1] (filled on the device, kernels/common/fill.h) and
// every benchmark checks its outputs: finite and within [-1, 1], and for bf16
// decode one head against a host reference (a failed check marks the row an
// error). Each timed call is bracketed by CUDA events with the L2 flushed first. It
// reports prefill TFLOP/s (FLOPs = 4 B Hq Sq Sk d, halved for causal), the
// naive kernel's extra memory (its materialised S and P), and decode bytes/s
// against the device-to-device copy bandwidth measured at start-up. It writes
// three CSV tables into --profile_dir (default "."), for a profiled cost model:
//   prefill_profile.csv: kernel,dtype,batch,q_len,kv_len,num_q_heads,num_kv_heads,head_dim,causal,
//                        time_us,tflops,workspace_bytes
//   decode_profile.csv:  kernel,dtype,batch,kv_len,num_q_heads,num_kv_heads,head_dim,block_size,
//                        num_splits,time_us,bytes,gbps,pct_copy
//   copy_bandwidth.csv:  bytes,gbps
// (time_us: mean per call; bytes: K/V/q/out bytes a decode call must move;
// gbps: 1e9 bytes/s; workspace_bytes: device scratch beyond inputs/outputs.)
// Without a GPU it prints "SKIP: no CUDA device (...)" and returns 77; with a
// GPU the CUDA runtime cannot use, it fails (kernels/common/device_probe.h).
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "engine/common/rng.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/naive_attention.h"
#include "kernels/common/bench_util.h"
#include "kernels/common/fill.h"
#include "kernels/common/model_ops.h"

namespace testbed::bench {
namespace {

GpuTimer* g_timer = nullptr;
double g_copy_bps = 0.0;
ProfileTable g_prefill("kernel,dtype,batch,q_len,kv_len,num_q_heads,num_kv_heads,head_dim,causal,time_us,tflops,"
                       "workspace_bytes");
ProfileTable g_decode("kernel,dtype,batch,kv_len,num_q_heads,num_kv_heads,head_dim,block_size,num_splits,time_us,"
                      "bytes,gbps,pct_copy");
constexpr int kBlockSize = 16;

struct Shape {
  DType dtype;
  int batch, len, hq, hkv, d;
  std::string name(const char* kind) const {
    return format("%s/%s/d%d/B%d/L%d/H%d:%d", kind, dtype_name(dtype), d, batch, len, hq, hkv);
  }
};

// Random 16-bit inputs in [-1, 1], filled on the device (kernels/common/fill.h):
// element i of a buffer filled with `seed` is fill_uniform(seed, i, -1, 1).
DeviceBuffer random_buffer(size_t elems, DType dtype, uint64_t seed) {
  DeviceBuffer b(elems * 2);
  cuda_check(launch_fill_uniform(b.get(), elems, dtype, -1.0f, 1.0f, seed, nullptr), "fill");
  return b;
}
constexpr uint64_t kSeedQ = 1, kSeedK = 2, kSeedV = 3;

// float -> bf16 -> float, round to nearest even (the device's __float2bfloat16_rn).
float round_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
float bf16_bits_to_float(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Every output of `out` (16-bit, `elems` of them) must be finite and inside
// [-1, 1] (attention averages values drawn from [-1, 1]); "" or what is wrong.
std::string check_convex(const DeviceBuffer& out, size_t elems, DType dtype) {
  const size_t n = std::min<size_t>(elems, size_t(1) << 20);
  const std::vector<uint16_t> h = out.download<uint16_t>(n);
  for (size_t i = 0; i < n; ++i) {
    float f;
    if (dtype == DType::kBF16) {
      f = bf16_bits_to_float(h[i]);
    } else {  // fp16: exponent all ones is Inf/NaN; magnitude above 1 is impossible here
      if ((h[i] & 0x7c00u) == 0x7c00u) return format("output %zu is not finite", i);
      f = (h[i] & 0x7fffu) > 0x3c0au ? 2.0f : 0.0f;  // 0x3c0a: 1.0098
    }
    if (!std::isfinite(f) || std::abs(f) > 1.0f + 1e-2f) return format("output %zu is %g, outside [-1, 1]", i, f);
  }
  return "";
}

// `seqs` sequences of `len` tokens each, their blocks scattered over the cache
// (a shuffled permutation, as a long-running cache looks).
struct PagedCache {
  KvLayout layout;
  DeviceBuffer k, v, indptr, indices, lens;
  std::vector<int32_t> ids;  // block table, host copy: sequence s owns ids[s * per_seq ..]
  PagedCache(int seqs, int len, int hkv, int d, DType dtype = DType::kBF16) {
    const int per_seq = (len + kBlockSize - 1) / kBlockSize;
    layout = KvLayout{seqs * per_seq, kBlockSize, hkv, d};
    k = random_buffer(layout.num_elements(), dtype, kSeedK);
    v = random_buffer(layout.num_elements(), dtype, kSeedV);
    std::vector<int32_t> ptr{0}, l(seqs, len);
    ids.resize(layout.num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    Rng rng(1);
    for (size_t i = ids.size() - 1; i > 0; --i) std::swap(ids[i], ids[rng.below(i + 1)]);
    for (int s = 0; s < seqs; ++s) ptr.push_back((s + 1) * per_seq);
    indptr.upload(ptr);
    indices.upload(ids);
    lens.upload(l);
  }
  PagedKvTable table(int seqs) const { return {indptr.as<int32_t>(), indices.as<int32_t>(), lens.as<int32_t>(), seqs}; }
};

double causal_flops(const Shape& s) { return 4.0 * s.batch * s.hq * double(s.len) * s.len * s.d / 2.0; }

void record_prefill(benchmark::State& state, const char* kind, const Shape& s, double sec, size_t workspace) {
  if (state.error_occurred()) return;
  const double tflops = sec > 0 ? causal_flops(s) / sec * 1e-12 : 0.0;
  state.counters["TFLOPs"] = tflops;
  state.counters["ws_MiB"] = workspace / double(1 << 20);
  g_prefill.set(s.name(kind), format("%s,%s,%d,%d,%d,%d,%d,%d,1,%.3f,%.2f,%zu", kind, dtype_name(s.dtype), s.batch,
                                     s.len, s.len, s.hq, s.hkv, s.d, sec * 1e6, tflops, workspace));
}

void bm_paged_prefill(benchmark::State& state, Shape s) {
  PagedCache cache(s.batch, s.len, s.hkv, s.d, s.dtype);
  const size_t q_elems = size_t(s.batch) * s.len * s.hq * s.d;
  DeviceBuffer q = random_buffer(q_elems, s.dtype, kSeedQ), out(q_elems * 2), q_indptr;
  std::vector<int32_t> qp(s.batch + 1);
  for (int i = 0; i <= s.batch; ++i) qp[i] = i * s.len;
  q_indptr.upload(qp);
  PagedPrefillParams p;
  p.dtype = s.dtype;
  p.q = q.get();
  p.out = out.get();
  p.q_indptr = q_indptr.as<int32_t>();
  p.num_q_heads = s.hq;
  p.max_q_len = s.len;
  p.k_cache = cache.k.get();
  p.v_cache = cache.v.get();
  p.layout = cache.layout;
  p.table = cache.table(s.batch);
  p.scale = 1.0f / std::sqrt(float(s.d));
  const double sec = g_timer->run(state, [&] { return launch_paged_prefill_attention(p, g_timer->stream()); });
  if (!state.error_occurred()) {
    const std::string bad = check_convex(out, q_elems, s.dtype);
    if (!bad.empty()) state.SkipWithError(("output check: " + bad).c_str());
  }
  record_prefill(state, "paged_prefill", s, sec, 0);
}

void bm_varlen_prefill(benchmark::State& state, Shape s) {
  const size_t q_elems = size_t(s.batch) * s.len * s.hq * s.d, kv_elems = size_t(s.batch) * s.len * s.hkv * s.d;
  DeviceBuffer q = random_buffer(q_elems, s.dtype, kSeedQ), k = random_buffer(kv_elems, s.dtype, kSeedK),
               v = random_buffer(kv_elems, s.dtype, kSeedV), out(q_elems * 2), cu;
  std::vector<int32_t> c(s.batch + 1);
  for (int i = 0; i <= s.batch; ++i) c[i] = i * s.len;
  cu.upload(c);
  VarlenPrefillParams p;
  p.dtype = s.dtype;
  p.q = q.get();
  p.out = out.get();
  p.k = k.get();
  p.v = v.get();
  p.cu_seqlens_q = p.cu_seqlens_k = cu.as<int32_t>();
  p.num_seqs = s.batch;
  p.max_q_len = s.len;
  p.num_q_heads = s.hq;
  p.num_kv_heads = s.hkv;
  p.head_dim = s.d;
  p.causal = true;
  p.scale = 1.0f / std::sqrt(float(s.d));
  const double sec = g_timer->run(state, [&] { return launch_varlen_prefill_attention(p, g_timer->stream()); });
  if (!state.error_occurred()) {
    const std::string bad = check_convex(out, q_elems, s.dtype);
    if (!bad.empty()) state.SkipWithError(("output check: " + bad).c_str());
  }
  record_prefill(state, "varlen_prefill", s, sec, 0);
}

void bm_naive(benchmark::State& state, Shape s) {
  const size_t q_elems = size_t(s.batch) * s.len * s.hq * s.d, kv_elems = size_t(s.batch) * s.len * s.hkv * s.d;
  DeviceBuffer q = random_buffer(q_elems, s.dtype, kSeedQ), k = random_buffer(kv_elems, s.dtype, kSeedK),
               v = random_buffer(kv_elems, s.dtype, kSeedV), out(q_elems * 2);
  const size_t ws_bytes = naive_attention_workspace_bytes(s.len, s.len, s.hq, s.dtype);
  DeviceBuffer ws(ws_bytes);
  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasCreate failed");
    return;
  }
  NaiveAttentionParams p;
  p.dtype = s.dtype;
  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  p.out = out.get();
  p.batch = s.batch;
  p.q_len = p.kv_len = s.len;
  p.num_q_heads = s.hq;
  p.num_kv_heads = s.hkv;
  p.head_dim = s.d;
  p.causal = true;
  p.scale = 1.0f / std::sqrt(float(s.d));
  p.workspace = ws.get();
  const double sec = g_timer->run(state, [&] { return launch_naive_attention(p, handle, g_timer->stream()); });
  if (!state.error_occurred()) {
    const std::string bad = check_convex(out, q_elems, s.dtype);
    if (!bad.empty()) state.SkipWithError(("output check: " + bad).c_str());
  }
  cublasDestroy(handle);
  record_prefill(state, "naive", s, sec, ws_bytes);
}

// Sequence 0, query head 0 of a bf16 paged decode, recomputed on the host from
// the fill's seeds (double precision): "" or the relative L2 error when above 2e-2.
std::string check_decode_head(const DeviceBuffer& out, const PagedCache& cache, const Shape& s) {
  const int d = s.d;
  std::vector<double> q(d), o(d, 0.0), scores(s.len);
  for (int x = 0; x < d; ++x) q[x] = round_bf16(fill_uniform(kSeedQ, x, -1, 1));
  const double scale = 1.0 / std::sqrt(double(d));
  double m = -1e300;
  for (int p = 0; p < s.len; ++p) {
    const size_t off = cache.layout.offset(cache.ids[p / kBlockSize], 0, p % kBlockSize);
    double dot = 0;
    for (int x = 0; x < d; ++x) dot += q[x] * round_bf16(fill_uniform(kSeedK, off + x, -1, 1));
    scores[p] = dot * scale;
    m = std::max(m, scores[p]);
  }
  double l = 0;
  for (int p = 0; p < s.len; ++p) {
    const double w = std::exp(scores[p] - m);
    l += w;
    const size_t off = cache.layout.offset(cache.ids[p / kBlockSize], 0, p % kBlockSize);
    for (int x = 0; x < d; ++x) o[x] += w * round_bf16(fill_uniform(kSeedV, off + x, -1, 1));
  }
  const std::vector<uint16_t> got = out.download<uint16_t>(d);
  double err = 0, norm = 0;
  for (int x = 0; x < d; ++x) {
    const double ref = o[x] / l, g = bf16_bits_to_float(got[x]);
    err += (g - ref) * (g - ref);
    norm += ref * ref;
  }
  const double rel = std::sqrt(err / std::max(norm, 1e-30));
  return rel <= 2e-2 ? "" : format("sequence 0 head 0 differs from the host reference by %.3g (relative L2)", rel);
}

void bm_paged_decode(benchmark::State& state, Shape s) {
  PagedCache cache(s.batch, s.len, s.hkv, s.d, s.dtype);
  const size_t q_elems = size_t(s.batch) * s.hq * s.d;
  DeviceBuffer q = random_buffer(q_elems, s.dtype, kSeedQ), out(q_elems * 2);
  PagedDecodeParams p;
  p.dtype = s.dtype;
  p.q = q.get();
  p.out = out.get();
  p.num_q_heads = s.hq;
  p.k_cache = cache.k.get();
  p.v_cache = cache.v.get();
  p.layout = cache.layout;
  p.table = cache.table(s.batch);
  p.scale = 1.0f / std::sqrt(float(s.d));
  p.plan = plan_decode(s.batch, s.hkv, s.len, g_timer->num_sms(), decode_ctas_per_sm(s.dtype, s.d, s.hq / s.hkv));
  DeviceBuffer ws(std::max<size_t>(1, decode_workspace_bytes(p.plan, s.batch, s.hq, s.d)));
  p.workspace = ws.get();
  const double sec = g_timer->run(state, [&] { return launch_paged_decode_attention(p, g_timer->stream()); });
  if (state.error_occurred()) return;
  {  // the outputs: bounded, and sequence 0's query head 0 against a host reference
    std::string bad = check_convex(out, q_elems, s.dtype);
    if (bad.empty() && s.dtype == DType::kBF16) bad = check_decode_head(out, cache, s);
    if (!bad.empty()) {
      state.SkipWithError(("output check: " + bad).c_str());
      return;
    }
  }
  const double bytes = 2.0 * s.batch * double(s.len) * s.hkv * s.d * 2 + 2.0 * q_elems * 2;  // K + V, q + out
  const double bps = sec > 0 ? bytes / sec : 0.0;
  const double pct = g_copy_bps > 0 ? 100.0 * bps / g_copy_bps : 0.0;
  state.counters["GBps"] = bps * 1e-9;
  state.counters["pct_copy"] = pct;
  state.counters["splits"] = p.plan.num_splits;
  g_decode.set(s.name("paged_decode"),
               format("paged_decode,%s,%d,%d,%d,%d,%d,%d,%d,%.3f,%.0f,%.1f,%.1f", dtype_name(s.dtype), s.batch, s.len,
                      s.hq, s.hkv, s.d, kBlockSize, p.plan.num_splits, sec * 1e6, bytes, bps * 1e-9, pct));
}

void register_all() {
  // Set-up failures (out of memory, ...) skip the benchmark with the reason instead of aborting the run.
  auto reg = [](const char* kind, void (*fn)(benchmark::State&, Shape), Shape s) {
    benchmark::RegisterBenchmark(s.name(kind).c_str(),
                                 [fn, s](benchmark::State& st) {
                                   try {
                                     fn(st, s);
                                   } catch (const std::exception& e) {
                                     st.SkipWithError(e.what());
                                   }
                                 })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  };
  const DType bf = DType::kBF16, fp = DType::kFP16;
  // Prefill, causal, Llama-3-8B heads (32 q, 8 KV): the 300 TFLOP/s goal is at d=128, >= 4k tokens.
  for (int len : {1024, 4096, 8192}) reg("paged_prefill", bm_paged_prefill, {bf, 1, len, 32, 8, 128});
  reg("paged_prefill", bm_paged_prefill, {bf, 4, 4096, 32, 8, 128});
  reg("paged_prefill", bm_paged_prefill, {fp, 1, 4096, 32, 8, 128});
  reg("paged_prefill", bm_paged_prefill, {bf, 1, 4096, 32, 8, 64});
  reg("varlen_prefill", bm_varlen_prefill, {bf, 1, 4096, 32, 8, 128});
  // The baseline with S and P in HBM: same shapes, so time and memory compare directly.
  for (int len : {1024, 4096}) reg("naive", bm_naive, {bf, 1, len, 32, 8, 128});
  // Decode: Llama-3-8B (GQA 4) and Llama-3-70B (GQA 8) heads; the 80% goal is at long contexts.
  for (int hq : {32, 64})
    for (int batch : {1, 8, 64})
      for (int len : {1024, 8192, 32768}) reg("paged_decode", bm_paged_decode, {bf, batch, len, hq, 8, 128});
  reg("paged_decode", bm_paged_decode, {fp, 8, 8192, 32, 8, 128});
  reg("paged_decode", bm_paged_decode, {bf, 8, 8192, 32, 8, 64});
}

}  // namespace
}  // namespace testbed::bench

int main(int argc, char** argv) {
  using namespace testbed::bench;
  std::string profile_dir;
  if (const int rc = start_benchmarks("bench_attention", argc, argv, profile_dir)) return rc;
  GpuTimer timer;
  g_timer = &timer;
  g_copy_bps = timer.report_copy_bandwidth();
  g_prefill.stream_to(profile_dir + "/prefill_profile.csv");
  g_decode.stream_to(profile_dir + "/decode_profile.csv");
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  bool ok = g_prefill.write(profile_dir + "/prefill_profile.csv") && g_decode.write(profile_dir + "/decode_profile.csv");
  ProfileTable copy("bytes,gbps");
  copy.set("copy", format("%zu,%.1f", size_t(1) << 30, g_copy_bps * 1e-9));
  ok = copy.write(profile_dir + "/copy_bandwidth.csv") && ok;
  std::printf("profiles %s %s/{prefill,decode}_profile.csv, copy_bandwidth.csv\n", ok ? "written to" : "NOT written to",
              profile_dir.c_str());
  return ok ? 0 : 1;
}
