// Engine benchmarks (Google Benchmark):
//   ./build/engine/bench/bench_engine [--benchmark_filter=...]
// - BM_SchedulerStep: scheduler + KV cache manager cost of one step at N running
//   sequences with the prefix cache on: Engine::begin_step and end_step, the
//   executor (which returns tokens at no cost) excluded; counters split the two.
// - BM_BlockHash: chained block hashing throughput.
// - BM_KvCacheChurn: a full prefix cache of N blocks where every prompt is
//   new, as on the Azure conversation trace: each prompt's blocks are taken
//   (evicting the least recently freed), registered and freed; per block.
//   Second argument: KiB of other memory read between prompts (untimed), as
//   a simulation's other work does, so the cache's records start cold.
// - BM_CpuDecode: the CPU executor's decode tokens/s on the tiny model.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "engine/block_hash.h"
#include "engine/cpu_executor.h"
#include "engine/engine.h"
#include "engine/kv_cache_manager.h"
#include "engine/model/llama_weights.h"
#include "engine/common/rng.h"

using namespace testbed;

namespace {

// Emits a token for every sampling sequence, instantly.
class FreeExecutor : public Executor {
 public:
  StepResult execute(const Batch& batch) override {
    StepResult r;
    r.reserve(batch.items.size());
    for (const ScheduledSeq& item : batch.items)
      if (item.samples())
        r.add_token(static_cast<int32_t>(item.seq->num_tokens() % 1000));
      else
        r.add_none();
    return r;
  }
  std::string name() const override { return "free"; }
};

std::vector<int32_t> tokens(Rng& rng, int n) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng.below(32000));
  return t;
}

}  // namespace

static void BM_SchedulerStep(benchmark::State& state) {
  // Steady state: num_seqs sequences decode; each finishes after 512 tokens and
  // a new request (2,000 shared + 200 unique prompt tokens) takes its place, so
  // steps include admissions with prefix hits, block commits and frees.
  const int num_seqs = static_cast<int>(state.range(0));
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = num_seqs;
  cfg.scheduler.max_batch_tokens = 8192;
  cfg.cache.prefix_cache = true;
  cfg.max_model_len = 4096;
  const int num_blocks = num_seqs * 200;
  Engine engine(0, cfg, num_blocks, std::make_unique<FreeExecutor>(), nullptr);
  Rng rng(1);
  const std::vector<int32_t> system_prompt = tokens(rng, 2000);
  int64_t next_id = 0;
  auto add = [&](double now) {
    Request r;
    r.id = next_id++;
    r.prompt = system_prompt;
    const auto user = tokens(rng, 200);
    r.prompt.insert(r.prompt.end(), user.begin(), user.end());
    r.max_output_tokens = 64 + static_cast<int>(rng.below(896));
    engine.add_request(std::move(r), now);
  };
  double now = 0;
  auto step = [&] {
    engine.step(now);
    now += 0.01;
  };
  for (int i = 0; i < num_seqs; ++i) add(now);
  for (int i = 0; i < 2000; ++i) {  // warm up into the steady state
    step();
    while (engine.scheduler().num_running() + engine.scheduler().num_waiting() < num_seqs) add(now);
  }
  // Timed by hand: PauseTiming/ResumeTiming read the thread CPU clock, a
  // system call that costs microseconds in a VM.
  // Only the scheduler and the KV manager are timed (schedule, then
  // postprocess with its block commits and frees), not the executor.
  using Clock = std::chrono::steady_clock;
  double begin_s = 0, end_s = 0;  // the two halves, reported as counters
  int64_t iters = 0;
  StepPlan plan;    // reused, as the simulator's fleet does
  StepOutcome out;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    engine.begin_step(now, plan);
    const auto t1 = Clock::now();
    const StepResult r = engine.executor().execute(plan.batch);
    const auto t2 = Clock::now();
    engine.end_step(plan, r, now + 0.01, out);
    const auto t3 = Clock::now();
    now += 0.01;
    benchmark::DoNotOptimize(out.num_finished);
    state.SetIterationTime(std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count());
    begin_s += std::chrono::duration<double>(t1 - t0).count();
    end_s += std::chrono::duration<double>(t3 - t2).count();
    ++iters;
    while (engine.scheduler().num_running() + engine.scheduler().num_waiting() < num_seqs) add(now);
  }
  state.counters["seqs_per_step"] = num_seqs;
  state.counters["begin_step_us"] = 1e6 * begin_s / static_cast<double>(iters);
  state.counters["end_step_us"] = 1e6 * end_s / static_cast<double>(iters);
}
BENCHMARK(BM_SchedulerStep)->Arg(64)->Arg(256)->Arg(1024)->UseManualTime()->Unit(benchmark::kMicrosecond);

static void BM_BlockHash(benchmark::State& state) {
  const int block_size = static_cast<int>(state.range(0));
  Rng rng(2);
  const std::vector<int32_t> t = tokens(rng, block_size * 1024);
  for (auto _ : state) {
    std::vector<uint64_t> hashes;
    hashes.reserve(1024);
    extend_block_hashes(hashes, t, block_size, 0);
    benchmark::DoNotOptimize(hashes.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(t.size()));
  state.SetLabel("items = tokens");
}
BENCHMARK(BM_BlockHash)->Arg(16)->Arg(64);

static void BM_KvCacheChurn(benchmark::State& state) {
  const int num_blocks = static_cast<int>(state.range(0));
  constexpr int kBlockSize = 16, kPromptBlocks = 72;  // the trace's mean prompt, 1,155 tokens
  KvCacheManager kv(num_blocks, kBlockSize, /*prefix_cache=*/true);
  kv.set_record_events(true);
  Rng rng(3);
  // Prompts ready before timing: a ring of distinct ones, more than the cache holds.
  const int num_prompts = 2 * num_blocks / kPromptBlocks + 8;
  std::vector<std::unique_ptr<Sequence>> prompts;
  for (int i = 0; i < num_prompts; ++i) {
    Request r;
    r.id = i;
    r.prompt = tokens(rng, kPromptBlocks * kBlockSize + 1);
    r.max_output_tokens = 1;
    prompts.push_back(std::make_unique<Sequence>(std::move(r)));
    prompts.back()->block_hashes(kBlockSize);
  }
  std::vector<int64_t> other(static_cast<size_t>(state.range(1)) * 1024 / sizeof(int64_t) + 1, 1);
  int64_t sink = 0;
  int64_t blocks = 0;
  size_t next = 0;
  for (auto _ : state) {
    if (state.range(1) > 0) {
      state.PauseTiming();
      for (size_t i = 0; i < other.size(); i += 8) sink += other[i];
      state.ResumeTiming();
    }
    Sequence& seq = *prompts[next];
    next = (next + 1) % prompts.size();
    seq.num_computed_tokens = 0;
    const PrefixHit hit = kv.find_cached_prefix(seq);  // a miss: the ring is longer than the cache
    if (!kv.allocate(seq, seq.num_tokens(), hit)) state.SkipWithError("no room");
    seq.num_computed_tokens = seq.num_tokens();
    kv.commit_full_blocks(seq);
    kv.free(seq);
    kv.clear_events();
    blocks += kPromptBlocks + 1;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(blocks);
  state.SetLabel("items = blocks taken, registered and freed");
}
BENCHMARK(BM_KvCacheChurn)->Args({28020, 0})->Args({28020, 4096})->Args({4096, 0})->Args({4096, 4096});

static void BM_CpuDecode(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const ModelConfig model = ModelConfig::from_json_file("experiments/models/tiny.json");
  const int block_size = 16, context = 512;
  const int blocks_per_seq = (context + 64) / block_size;
  CpuExecutor exec(model, make_dummy_weights(model, 0), batch * blocks_per_seq, block_size, 4096);
  Rng rng(3);
  std::vector<std::unique_ptr<Sequence>> seqs;
  Batch b;
  for (int i = 0; i < batch; ++i) {
    Request r;
    r.id = i;
    r.prompt = tokens(rng, context + 1);
    for (auto& x : r.prompt) x %= model.vocab_size;
    auto s = std::make_unique<Sequence>(std::move(r));
    for (int k = 0; k < blocks_per_seq; ++k) s->block_table.push_back(i * blocks_per_seq + k);
    s->num_computed_tokens = context;  // decode the last token over a 512-token context
    b.add(s.get(), context, 1);
    seqs.push_back(std::move(s));
  }
  for (auto _ : state) benchmark::DoNotOptimize(exec.execute(b).tokens.data());
  state.SetItemsProcessed(state.iterations() * batch);
  state.SetLabel("items = decode tokens, context 512");
}
BENCHMARK(BM_CpuDecode)->Arg(1)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);
