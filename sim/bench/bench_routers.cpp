// Routing decision cost per request at 64, 256 and 1,024 instances (Google Benchmark):
//   ./build/sim/bench/bench_sim --benchmark_filter=route_benchmark
// The prefix routers' indexes hold 1,024 prompts of 2,200 tokens spread over the
// instances (~140k blocks); each decision matches a 2,200-token prompt (137
// blocks of 16). The _with_hashing variants include hashing the prompt, which a
// real router also pays (the engine then reuses the hashes). The argument is
// the fleet size: every router scores each instance per decision, and the
// prefix index asks each group of 64 about a prompt's first block only.
#include <benchmark/benchmark.h>

#include "engine/block_hash.h"
#include "engine/common/rng.h"
#include "sim/router.h"

using namespace testbed;

namespace {

constexpr int kMaxFleet = 1024;
constexpr int kPrompts = 1024;
constexpr int kPromptTokens = 2200;

struct Setup {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<uint64_t>> hashes;
  std::vector<InstanceLoad> loads;
  Setup() {
    Rng rng(1);
    for (int p = 0; p < kPrompts; ++p) {
      std::vector<int32_t> t(kPromptTokens);
      for (auto& x : t) x = static_cast<int32_t>(rng.below(128000));
      std::vector<uint64_t> h;
      extend_block_hashes(h, t, 16, 0);
      prompts.push_back(std::move(t));
      hashes.push_back(std::move(h));
    }
    loads.resize(kMaxFleet);
    for (int i = 0; i < kMaxFleet; ++i) {
      loads[i].num_running = static_cast<int>(rng.below(200));
      loads[i].num_waiting = static_cast<int>(rng.below(20));
      loads[i].kv_usage = rng.uniform();
    }
  }
};

const Setup& setup() {
  static Setup s;
  return s;
}

std::unique_ptr<Router> warmed_router(const std::string& type, int instances, const std::vector<InstanceLoad>& loads) {
  RouterSetup rs;
  rs.num_instances = instances;
  rs.blocks_per_instance = 28020;
  auto r = make_router(router_choice(type), rs);
  const Setup& s = setup();
  Request req;
  for (int p = 0; p < kPrompts; ++p) {
    const int home = p % instances;
    if (r->wants_kv_events())
      for (size_t b = 0; b < s.hashes[p].size(); ++b)
        r->on_kv_event(home, KvEvent{KvEvent::Kind::BlockStored, s.hashes[p][b], 0, 16, b == 0});
    r->route(RoutingContext{req, s.hashes[p], loads});  // approximate routers learn by routing
  }
  return r;
}

void route_benchmark(benchmark::State& state, const std::string& type, bool with_hashing) {
  const int instances = static_cast<int>(state.range(0));
  const Setup& s = setup();
  const std::vector<InstanceLoad> loads(s.loads.begin(), s.loads.begin() + instances);
  auto r = warmed_router(type, instances, loads);
  Request req;
  std::vector<uint64_t> hashes;
  size_t p = 0;
  for (auto _ : state) {
    const size_t k = p++ % kPrompts;
    if (with_hashing) {
      hashes.clear();
      extend_block_hashes(hashes, s.prompts[k], 16, 0);
      benchmark::DoNotOptimize(r->route(RoutingContext{req, hashes, loads}));
    } else {
      benchmark::DoNotOptimize(r->route(RoutingContext{req, s.hashes[k], loads}));
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("items = routing decisions, " + std::to_string(instances) + " instances");
}

}  // namespace

#define ROUTER_BENCH(type)                                                                                   \
  BENCHMARK_CAPTURE(route_benchmark, type, std::string(#type), false)                                       \
      ->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);                                        \
  BENCHMARK_CAPTURE(route_benchmark, type##_with_hashing, std::string(#type), true)                        \
      ->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond)

ROUTER_BENCH(round_robin);
ROUTER_BENCH(least_loaded);
ROUTER_BENCH(prefix_precise);
ROUTER_BENCH(prefix_approx);
ROUTER_BENCH(weighted);
ROUTER_BENCH(cache_aware);
