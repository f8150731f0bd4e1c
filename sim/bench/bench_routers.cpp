// Routing decision cost per request at 64 instances (Google Benchmark):
//   ./build/sim/bench/bench_sim [--benchmark_filter=BM_Route]
// The prefix routers' indexes hold 1,024 prompts of 2,200 tokens spread over the
// instances (~140k blocks); each decision matches a 2,200-token prompt (137
// blocks of 16). BM_RouteWithHashing includes hashing the prompt, which a real
// router also pays (the engine then reuses the hashes).
#include <benchmark/benchmark.h>

#include "engine/block_hash.h"
#include "engine/common/rng.h"
#include "sim/router.h"

using namespace testbed;

namespace {

constexpr int kInstances = 64;
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
    loads.resize(kInstances);
    for (int i = 0; i < kInstances; ++i) {
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

std::unique_ptr<Router> warmed_router(const std::string& type) {
  RouterSetup rs;
  rs.num_instances = kInstances;
  rs.blocks_per_instance = 28020;
  auto r = make_router(router_choice(type), rs);
  const Setup& s = setup();
  Request req;
  for (int p = 0; p < kPrompts; ++p) {
    const int home = p % kInstances;
    if (r->wants_kv_events())
      for (uint64_t h : s.hashes[p]) r->on_kv_event(home, KvEvent{KvEvent::Kind::BlockStored, h, 0, 16});
    r->route(RoutingContext{req, s.hashes[p], s.loads});  // approximate routers learn by routing
  }
  return r;
}

void route_benchmark(benchmark::State& state, const std::string& type, bool with_hashing) {
  auto r = warmed_router(type);
  const Setup& s = setup();
  Request req;
  std::vector<uint64_t> hashes;
  size_t p = 0;
  for (auto _ : state) {
    const size_t k = p++ % kPrompts;
    if (with_hashing) {
      hashes.clear();
      extend_block_hashes(hashes, s.prompts[k], 16, 0);
      benchmark::DoNotOptimize(r->route(RoutingContext{req, hashes, s.loads}));
    } else {
      benchmark::DoNotOptimize(r->route(RoutingContext{req, s.hashes[k], s.loads}));
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("items = routing decisions, 64 instances");
}

}  // namespace

#define ROUTER_BENCH(type)                                                                         \
  BENCHMARK_CAPTURE(route_benchmark, type, std::string(#type), false)->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(route_benchmark, type##_with_hashing, std::string(#type), true)->Unit(benchmark::kMicrosecond)

ROUTER_BENCH(round_robin);
ROUTER_BENCH(least_loaded);
ROUTER_BENCH(prefix_precise);
ROUTER_BENCH(prefix_approx);
ROUTER_BENCH(weighted);
ROUTER_BENCH(cache_aware);
