// bench_verify: Google Benchmark driver of the speculative-verification kernel.
//
//   build/kernels/bench_verify --benchmark_min_time=0.05
//
// Batches of `seqs` sequences with k = 4 drafts each over a vocabulary of V,
// greedy and rejection sampling, each draft accepted half the time. Reports
// sequences/s and the bytes of probability rows read per second against the
// device-to-device copy bandwidth: verification reads every row it reaches
// once (greedy: the target's; rejection: target and draft rows), so it is
// memory-bound. Each timed call is bracketed by CUDA events, the L2 flushed
// first. Without a GPU it prints "SKIP: no CUDA device (...)" and returns 77;
// with a GPU the runtime cannot use, it fails (kernels/common/device_probe.h).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <vector>

#include "engine/common/rng.h"
#include "kernels/common/bench_util.h"
#include "kernels/common/device_buffer.h"
#include "kernels/spec/verify.h"

namespace testbed::bench {
namespace {

GpuTimer* g_timer = nullptr;
double g_copy_bps = 0.0;

void BM_Verify(benchmark::State& state) {
  const int seqs = static_cast<int>(state.range(0)), vocab = static_cast<int>(state.range(1));
  const bool rejection = state.range(2) != 0;
  const int k = 4;
  Rng rng(1);
  std::vector<int32_t> offsets{0}, drafts, positions;
  std::vector<uint64_t> seeds;
  std::vector<int64_t> requests;
  for (int i = 0; i < seqs; ++i) {
    offsets.push_back(offsets.back() + k);
    seeds.push_back(rng.next_u64());
    requests.push_back(i);
    positions.push_back(i);
  }
  // Every row uniform but for one token of mass 1/2: the drafts are that token,
  // so greedy keeps them and rejection sampling keeps each with probability 1 (p = q).
  const size_t p_rows = static_cast<size_t>(seqs) * (k + 1), q_rows = static_cast<size_t>(seqs) * k;
  std::vector<float> row(vocab, 0.5f / vocab);
  row[7] += 0.5f;
  std::vector<float> p(p_rows * vocab), q(q_rows * vocab);
  for (size_t r = 0; r < p_rows; ++r) std::copy(row.begin(), row.end(), p.begin() + r * vocab);
  for (size_t r = 0; r < q_rows; ++r) std::copy(row.begin(), row.end(), q.begin() + r * vocab);
  // Half the drafts wrong: a rejection at a random place in each sequence.
  drafts.assign(offsets.back(), 7);
  for (int i = 0; i < seqs; ++i)
    if (rng.below(2)) drafts[offsets[i] + static_cast<int>(rng.below(k))] = 3;
  DeviceBuffer d_offsets, d_drafts, d_positions, d_seeds, d_requests, d_p, d_q, d_acc, d_tok;
  d_offsets.upload(offsets);
  d_drafts.upload(drafts);
  d_positions.upload(positions);
  d_seeds.upload(seeds);
  d_requests.upload(requests);
  d_p.upload(p);
  d_q.upload(q);
  d_acc.resize(seqs * sizeof(int32_t));
  d_tok.resize((offsets.back() + seqs) * sizeof(int32_t));
  VerifyBatch b;
  b.num_seqs = seqs;
  b.vocab = vocab;
  b.draft_offsets = d_offsets.as<int32_t>();
  b.draft_tokens = d_drafts.as<int32_t>();
  b.target_probs = d_p.as<float>();
  b.draft_probs = d_q.as<float>();
  b.seeds = d_seeds.as<uint64_t>();
  b.request_ids = d_requests.as<int64_t>();
  b.positions = d_positions.as<int32_t>();
  const VerifyOutput out{d_acc.as<int32_t>(), d_tok.as<int32_t>()};
  const double s = g_timer->run(state, [&] { return launch_verify(b, out, rejection, g_timer->stream()); });
  if (s <= 0) return;
  // Rows reached: up to the first wrong draft, plus the emitted row (approximately (k + 1) / 2 + ... ; counted as all).
  const double bytes = static_cast<double>(p_rows + (rejection ? q_rows : 0)) * vocab * sizeof(float);
  state.counters["seqs_per_s"] = seqs / s;
  state.counters["GB/s_if_all_rows"] = bytes / s * 1e-9;
  state.counters["pct_copy"] = 100.0 * bytes / s / g_copy_bps;
}

BENCHMARK(BM_Verify)
    ->ArgNames({"seqs", "vocab", "rejection"})
    ->ArgsProduct({{64, 256}, {32000, 128256}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace testbed::bench

int main(int argc, char** argv) {
  using namespace testbed::bench;
  if (const int rc = testbed::cuda_device_gate("bench_verify")) return rc;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  GpuTimer timer;
  g_timer = &timer;
  g_copy_bps = timer.report_copy_bandwidth();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
