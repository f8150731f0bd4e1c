// Semantic cache lookup cost per request (Google Benchmark):
//   ./build/sim/bench/bench_sim --benchmark_filter=SemanticCache
// The cache holds N entries (100k, 1M) of 16-token prompts with random unit
// embeddings of dimension 64 (no structure: the hardest case for HNSW), built
// once per N with hnsw_m 16 and ef_construction 100 (the build time is printed
// and reported as the counter build_s). Each timed lookup is a paraphrase (RMS
// noise 0.1) of a cached entry under a new wording, so the exact match misses
// and the HNSW search answers, at ef_search 16, 32 and 64 (the default: the
// second argument); recall@1 counts how often it found the entry an exhaustive
// scan finds, on 200 of the queries. BM_SemanticCacheExactHit times a repeated
// wording (normalise, hash, compare).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "engine/common/rng.h"
#include "engine/semantic_cache.h"

using namespace testbed;

namespace {

constexpr int kDim = 64;
constexpr int kPromptTokens = 16;
constexpr int kQueries = 4096;
constexpr int kRecallQueries = 200;

std::vector<float> random_unit(Rng& rng, const float* base, double noise) {
  std::vector<float> v(kDim);
  double sum = 0;
  for (int i = 0; i < kDim; ++i) {
    const double x = (base ? base[i] : 0.0) + noise / std::sqrt(double{kDim}) * rng.normal();
    v[i] = static_cast<float>(x);
    sum += x * x;
  }
  for (float& x : v) x = static_cast<float>(x / std::sqrt(sum));
  return v;
}

std::vector<int32_t> random_prompt(Rng& rng) {
  std::vector<int32_t> p(kPromptTokens);
  for (auto& t : p) t = static_cast<int32_t>(rng.below(128000));
  return p;
}

struct Filled {
  std::unique_ptr<SemanticCache> cache;
  std::vector<float> vectors;  // entry i's unit embedding at i * kDim (entry ids count insertions)
  std::vector<std::vector<int32_t>> prompts;  // a few cached prompts, for exact hits
  std::vector<std::vector<int32_t>> query_prompts;
  std::vector<std::vector<float>> query_embeddings;
  std::vector<int64_t> nearest;  // the exhaustive answer to the first kRecallQueries queries
  double build_s = 0;
};

Filled& filled(int64_t n) {
  static std::map<int64_t, std::unique_ptr<Filled>> by_size;
  auto& slot = by_size[n];
  if (slot) return *slot;
  slot = std::make_unique<Filled>();
  Filled& f = *slot;
  SemanticCacheConfig c;
  c.enabled = true;
  c.tau = 0.01;  // every nearest neighbour answers, so recall can be read from entry_id
  c.capacity = n;
  c.hnsw_m = 16;
  c.hnsw_ef_construction = 100;
  c.hnsw_ef_search = 64;
  f.cache = std::make_unique<SemanticCache>(c, kDim);
  Rng rng(7);
  f.vectors.reserve(static_cast<size_t>(n) * kDim);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    const auto prompt = random_prompt(rng);
    const auto e = random_unit(rng, nullptr, 1.0);
    f.cache->insert(prompt, e, i, 0.0);
    f.vectors.insert(f.vectors.end(), e.begin(), e.end());
    if (i < kQueries) f.prompts.push_back(prompt);
  }
  f.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int q = 0; q < kQueries; ++q) {
    const int64_t target = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
    f.query_prompts.push_back(random_prompt(rng));
    f.query_embeddings.push_back(random_unit(rng, f.vectors.data() + target * kDim, 0.1));
  }
  for (int q = 0; q < kRecallQueries; ++q) {
    const auto& e = f.query_embeddings[q];
    int64_t best = 0;
    float best_dot = -2;
    for (int64_t i = 0; i < n; ++i) {
      float dot = 0;
      for (int d = 0; d < kDim; ++d) dot += e[d] * f.vectors[i * kDim + d];
      if (dot > best_dot) best_dot = dot, best = i;
    }
    f.nearest.push_back(best);
  }
  std::fprintf(stderr, "semantic cache: %lld entries built in %.1f s\n", static_cast<long long>(n), f.build_s);
  return f;
}

void BM_SemanticCacheLookup(benchmark::State& state) {
  Filled& f = filled(state.range(0));
  f.cache->set_ef_search(static_cast<int>(state.range(1)));
  int found = 0;
  for (int q = 0; q < kRecallQueries; ++q)
    found += f.cache->lookup(f.query_prompts[q], f.query_embeddings[q], 0.0).entry_id == f.nearest[q];
  size_t q = 0, hits = 0;
  for (auto _ : state) {
    const auto r = f.cache->lookup(f.query_prompts[q], f.query_embeddings[q], 0.0);
    hits += r.is_hit();
    benchmark::DoNotOptimize(r);
    q = (q + 1) % kQueries;
  }
  state.counters["build_s"] = f.build_s;
  state.counters["recall@1"] = static_cast<double>(found) / kRecallQueries;
  state.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_SemanticCacheLookup)
    ->ArgsProduct({{100000, 1000000}, {16, 32, 64}})
    ->ArgNames({"entries", "ef"})
    ->Unit(benchmark::kMicrosecond);

void BM_SemanticCacheExactHit(benchmark::State& state) {
  Filled& f = filled(state.range(0));
  size_t q = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.cache->lookup(f.prompts[q], f.query_embeddings[q], 0.0));
    q = (q + 1) % f.prompts.size();
  }
}
BENCHMARK(BM_SemanticCacheExactHit)->Arg(100000)->Arg(1000000)->ArgName("entries")->Unit(benchmark::kMicrosecond);

}  // namespace
