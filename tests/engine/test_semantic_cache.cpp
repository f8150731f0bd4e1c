// SemanticCache: at tau = 1 it is an exact-match LRU cache (checked against a
// list-and-map model); at lower tau the HNSW search makes the same decisions,
// request for request, as the exhaustive reference (ef_search >= capacity makes
// HNSW exact at this size, through evictions and slot reuse); TTL expiry, LRU
// order, empty embeddings, false hits growing as tau falls, and the keys.
#include <catch2/catch.hpp>
#include <cmath>
#include <list>
#include <map>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/semantic_cache.h"
#include "traces/workload.h"

using namespace testbed;
using Kind = SemanticCache::Lookup::Kind;

namespace {

std::vector<Request> semantic_requests(int64_t n, const std::vector<std::pair<std::string, std::string>>& keys) {
  WorkloadConfig c;
  c.kind.name = "semantic";
  c.num_requests = n;
  c.rate = 100.0;
  c.output_tokens = 4;
  set_options(c, {{"workload.prompt_tokens", "24"}, {"workload.embedding_dim", "32"}});
  set_options(c, keys);
  c.validate();
  auto source = make_workload(c, WorkloadContext{});
  std::vector<Request> out;
  while (auto r = source->next()) out.push_back(std::move(*r));
  return out;
}

// A clustered workload: 100 topics of ~20 intents whose centroids are ~0.8
// apart in cosine, paraphrases ~0.98 from each other.
std::vector<Request> clustered_requests(int64_t n) {
  return semantic_requests(n, {{"workload.num_intents", "2000"},
                               {"workload.intent_zipf", "0.6"},
                               {"workload.intent_clusters", "100"},
                               {"workload.topic_spread", "0.5"},
                               {"workload.paraphrase_noise", "0.15"},
                               {"workload.exact_repeat", "0.3"}});
}

SemanticCacheConfig cache_config(double tau, int64_t capacity, double ttl_s = 0, int ef_search = 64) {
  SemanticCacheConfig c;
  c.enabled = true;
  c.tau = tau;
  c.capacity = capacity;
  c.ttl_s = ttl_s;
  c.hnsw_ef_search = ef_search;
  return c;
}

// The ingress's use: look up; on a miss, compute the answer and cache it.
SemanticCache::Lookup serve(SemanticCache& cache, const Request& r) {
  const auto hit = cache.lookup(r.prompt, r.embedding, r.arrival_s);
  if (!hit.is_hit()) cache.insert(r.prompt, r.embedding, r.intent, r.arrival_s);
  return hit;
}

std::vector<float> unit_axis(int dim, int axis, float tilt = 0, int tilt_axis = 1) {
  std::vector<float> v(static_cast<size_t>(dim), 0.0f);
  v[axis] = 1.0f;
  v[tilt_axis] += tilt;
  return v;
}

std::vector<int32_t> tokens(int first, int n = 8) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

}  // namespace

TEST_CASE("semantic cache at tau = 1 is an exact LRU cache: hits equal the ground truth", "[semantic_cache]") {
  const auto requests = semantic_requests(3000, {{"workload.num_intents", "300"}, {"workload.exact_repeat", "0.5"}});
  const int64_t capacity = 400;  // fewer than the distinct wordings: evictions decide hits
  SemanticCache cache(cache_config(1.0, capacity), 32);
  // The model: prompts by recency, least recent first.
  std::list<std::vector<int32_t>> lru;
  std::map<std::vector<int32_t>, std::list<std::vector<int32_t>>::iterator> where;
  int64_t expected_hits = 0, hits = 0, evictions = 0;
  for (const Request& r : requests) {
    INFO("request " << r.id);
    const auto it = where.find(r.prompt);
    const bool cached = it != where.end();
    if (cached) {
      lru.splice(lru.end(), lru, it->second);
      ++expected_hits;
    } else {
      if (static_cast<int64_t>(lru.size()) == capacity) {
        where.erase(lru.front());
        lru.pop_front();
        ++evictions;
      }
      where[r.prompt] = lru.insert(lru.end(), r.prompt);
    }
    const auto hit = serve(cache, r);
    REQUIRE(hit.kind == (cached ? Kind::Exact : Kind::Miss));
    if (hit.is_hit()) {
      ++hits;
      CHECK(hit.intent == r.intent);  // an exact hit is never wrong
      CHECK(hit.similarity == 1.0);
    }
    REQUIRE(cache.size() <= capacity);
  }
  CHECK(hits == expected_hits);
  CHECK(expected_hits > 500);
  CHECK(evictions > 0);
  CHECK(cache.stats().num_exact_hits == expected_hits);
  CHECK(cache.stats().num_semantic_hits == 0);
  CHECK(cache.stats().num_evictions == evictions);
  CHECK(cache.stats().num_lookups == 3000);
  CHECK(cache.stats().num_insertions == 3000 - expected_hits);
}

TEST_CASE("semantic cache: HNSW decides every request as the exhaustive search does", "[semantic_cache]") {
  const auto requests = clustered_requests(5000);
  const int64_t capacity = 500;  // evictions reuse slots: HNSW updates points in place
  std::map<double, int64_t> false_hits;
  for (double tau : {0.95, 0.9, 0.8}) {
    for (double ttl : {0.0, 8.0}) {
      INFO("tau " << tau << " ttl " << ttl);
      SemanticCache hnsw(cache_config(tau, capacity, ttl, 2 * capacity), 32);
      SemanticCache exhaustive(cache_config(tau, capacity, ttl), 32, SemanticCache::Search::Exhaustive);
      int64_t semantic = 0, wrong = 0;
      for (const Request& r : requests) {
        INFO("request " << r.id);
        const auto a = serve(hnsw, r);
        const auto b = serve(exhaustive, r);
        REQUIRE(a.kind == b.kind);
        REQUIRE(a.entry_id == b.entry_id);
        REQUIRE(a.intent == b.intent);
        REQUIRE(a.similarity == b.similarity);
        if (a.kind == Kind::Semantic) ++semantic, wrong += a.intent != r.intent;
        if (a.kind == Kind::Exact) CHECK(a.intent == r.intent);
      }
      CHECK(semantic > 0);
      CHECK(hnsw.size() == exhaustive.size());
      CHECK(hnsw.stats().num_evictions == exhaustive.stats().num_evictions);
      CHECK(hnsw.stats().num_expirations == exhaustive.stats().num_expirations);
      if (ttl > 0) CHECK(hnsw.stats().num_expirations > 0);
      else CHECK(hnsw.stats().num_evictions > 0);
      if (ttl == 0) false_hits[tau] = wrong;
    }
  }
  // Intents of one topic are ~0.8 apart: a lower threshold answers more of them wrongly.
  CHECK(false_hits[0.95] <= false_hits[0.9]);
  CHECK(false_hits[0.9] < false_hits[0.8]);
  CHECK(false_hits[0.8] > 100);
}

TEST_CASE("semantic cache with the default ef_search is deterministic", "[semantic_cache]") {
  const auto requests = clustered_requests(1500);
  SemanticCache a(cache_config(0.9, 500), 32), b(cache_config(0.9, 500), 32);
  for (const Request& r : requests) {
    const auto x = serve(a, r), y = serve(b, r);
    REQUIRE(x.kind == y.kind);
    REQUIRE(x.entry_id == y.entry_id);
    REQUIRE(x.similarity == y.similarity);
  }
}

TEST_CASE("semantic cache: an entry expires exactly ttl_s after its insertion", "[semantic_cache]") {
  SemanticCache cache(cache_config(0.9, 10, /*ttl_s=*/10.0), 4);
  const auto e = unit_axis(4, 0);
  cache.insert(tokens(0), e, 7, 1.0);
  CHECK(cache.lookup(tokens(0), e, 6.0).kind == Kind::Exact);   // a hit refreshes recency, not age
  CHECK(cache.lookup(tokens(100), e, 11.0).kind == Kind::Semantic);  // age 10: still live
  CHECK(cache.stats().num_expirations == 0);
  const auto late = cache.lookup(tokens(0), e, std::nextafter(11.0, 12.0));
  CHECK(late.kind == Kind::Miss);
  CHECK(late.intent == -1);
  CHECK(late.entry_id == -1);
  CHECK(std::isinf(late.similarity));  // nothing left to compare
  CHECK(cache.size() == 0);
  CHECK(cache.stats().num_expirations == 1);
  CHECK_THROWS_AS(cache.lookup(tokens(0), e, 5.0), std::invalid_argument);  // time never runs back
}

TEST_CASE("semantic cache evicts the least recently used entry and a hit refreshes it", "[semantic_cache]") {
  for (auto search : {SemanticCache::Search::Hnsw, SemanticCache::Search::Exhaustive}) {
    SemanticCache cache(cache_config(0.99, 3), 4, search);
    for (int i = 0; i < 3; ++i) cache.insert(tokens(10 * i), unit_axis(4, i), i, i);
    CHECK(cache.lookup(tokens(0), {}, 3).kind == Kind::Exact);  // 0 is now the most recent
    cache.insert(tokens(30), unit_axis(4, 3), 3, 4);            // evicts 1
    CHECK(cache.size() == 3);
    CHECK(cache.stats().num_evictions == 1);
    CHECK(cache.lookup(tokens(10), {}, 5).kind == Kind::Miss);
    const auto by_vector = cache.lookup(tokens(99), unit_axis(4, 1), 5);
    CHECK(by_vector.kind == Kind::Miss);  // its embedding left the index too
    CHECK(by_vector.similarity == Approx(0.0).margin(1e-6));
    // LRU order now 2, 0, 3: two more insertions evict 2 then 0.
    cache.insert(tokens(40), unit_axis(4, 1), 4, 6);
    cache.insert(tokens(50), unit_axis(4, 2, 0.5f, 3), 5, 7);
    CHECK(cache.size() == 3);
    CHECK(cache.lookup(tokens(20), {}, 8).kind == Kind::Miss);
    CHECK(cache.lookup(tokens(0), {}, 8).kind == Kind::Miss);
    for (int first : {30, 40, 50}) CHECK(cache.lookup(tokens(first), {}, 8).kind == Kind::Exact);
    // A semantic hit answers with the nearest entry and refreshes it.
    const auto near = cache.lookup(tokens(77), unit_axis(4, 1, 0.05f, 0), 9);
    CHECK(near.kind == Kind::Semantic);
    CHECK(near.intent == 4);
    CHECK(near.similarity == Approx(1.0 / std::sqrt(1.0025)).epsilon(1e-6));
    cache.insert(tokens(60), unit_axis(4, 0), 6, 10);  // evicts 30 (40 was refreshed)
    CHECK(cache.lookup(tokens(30), {}, 11).kind == Kind::Miss);
    CHECK(cache.lookup(tokens(40), {}, 11).kind == Kind::Exact);
    CHECK(cache.stats().num_evictions == 4);
  }
}

TEST_CASE("semantic cache: exact matching needs equal tokens and embeddings are normalised", "[semantic_cache]") {
  SemanticCache cache(cache_config(0.9, 100), 4);
  cache.insert(tokens(0), {}, 1, 0);                      // no embedding: exact matching only
  cache.insert(tokens(50), {0, 0, 3.0f, 0}, 2, 0);        // any length: normalised
  CHECK(cache.lookup(tokens(0), {}, 1).intent == 1);
  CHECK(cache.lookup(tokens(0, 7), {}, 1).kind == Kind::Miss);  // a prefix is another prompt
  CHECK(cache.lookup(tokens(1), {1, 0, 0, 0}, 1).kind == Kind::Miss);
  const auto hit = cache.lookup(tokens(2), {0, 0.1f, 0.5f, 0}, 1);
  CHECK(hit.kind == Kind::Semantic);
  CHECK(hit.intent == 2);
  CHECK(hit.similarity == Approx(0.5 / std::sqrt(0.26)).epsilon(1e-6));
  // Inserting a cached prompt again replaces its entry.
  cache.insert(tokens(0), {1, 0, 0, 0}, 3, 2);
  CHECK(cache.size() == 2);
  CHECK(cache.lookup(tokens(0), {}, 3).intent == 3);
  CHECK(cache.lookup(tokens(9), {2, 0, 0, 0}, 3).intent == 3);
  CHECK_THROWS_AS(cache.lookup(tokens(0), {1, 0, 0}, 3), std::invalid_argument);
  CHECK_THROWS_AS(cache.insert(tokens(5), {0, 0, 0, 0}, 1, 3), std::invalid_argument);
  CHECK(cache.size() == 2);
  CHECK(prompt_hash(tokens(0)) != prompt_hash(tokens(0, 7)));
}

TEST_CASE("semantic cache keys are validated and errors name the key", "[semantic_cache]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"ingress.semantic_tau", "0"},         {"ingress.semantic_tau", "1.5"},
      {"ingress.cache_capacity", "0"},       {"ingress.cache_ttl_s", "-1"},
      {"ingress.lookup_s", "-0.001"},        {"ingress.hnsw_m", "0"},
      {"ingress.hnsw_ef_construction", "0"}, {"ingress.hnsw_ef_search", "-3"}};
  for (const auto& [key, value] : bad) {
    INFO(key << " = " << value);
    SemanticCacheConfig c;
    set_options(c, {{key, value}});
    try {
      c.validate();
      FAIL("no error");
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).rfind(key + ":", 0) == 0);
    }
    CHECK_THROWS_AS(SemanticCache(c, 4), ConfigError);
  }
  SemanticCacheConfig c;
  set_options(c, {{"ingress.semantic_cache", "true"}, {"ingress.semantic_tau", "1"}, {"ingress.cache_ttl_s", "30"}});
  CHECK(c.enabled);
  CHECK(c.tau == 1.0);
  CHECK(c.ttl_s == 30.0);
  CHECK_NOTHROW(c.validate());
}
