// Routers, each on synthetic routing contexts: the prefix routers pick the
// instance holding the prefix; prefix_precise forgets an evicted prefix while
// prefix_approx does not; cache_aware falls back to the shortest queue under
// imbalance; weighted trades prefix against load as its weights say.
#include <catch2/catch.hpp>
#include <iterator>
#include <map>
#include <set>

#include "engine/block_hash.h"
#include "engine/common/rng.h"
#include "sim/prefix_index.h"
#include "sim/router.h"

using namespace testbed;

namespace {

std::vector<uint64_t> hashes_of(int first_token, int num_blocks) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < num_blocks * 16; ++i) tokens.push_back(first_token + i);
  std::vector<uint64_t> h;
  extend_block_hashes(h, tokens, 16, 0);
  return h;
}

std::unique_ptr<Router> router(const std::string& type, int n = 4, int blocks = 1000,
                               const std::vector<std::pair<std::string, std::string>>& keys = {}) {
  RouterSetup s;
  s.num_instances = n;
  s.blocks_per_instance = blocks;
  return make_router(router_choice(type, keys), s);
}

void store(Router& r, int instance, const std::vector<uint64_t>& hashes) {
  for (size_t b = 0; b < hashes.size(); ++b)
    r.on_kv_event(instance, KvEvent{KvEvent::Kind::BlockStored, hashes[b], 0, 16, b == 0});
}

int route(Router& r, const std::vector<uint64_t>& hashes, const std::vector<InstanceLoad>& loads) {
  Request req;
  return r.route(RoutingContext{req, hashes, loads});
}

}  // namespace

TEST_CASE("PrefixIndex finds the longest cached chain per instance", "[router]") {
  PrefixIndex index(3);
  const auto h = hashes_of(0, 5);
  for (int b = 0; b < 5; ++b) index.add(h[b], 0, b == 0);
  for (int b = 0; b < 2; ++b) index.add(h[b], 1, b == 0);
  index.add(h[1], 2, false);  // a later block without the head is no match
  std::vector<int> m;
  index.match(h, m);
  CHECK(m == std::vector<int>{5, 2, 0});
  index.remove(h[0], 0, true);
  index.match(h, m);
  CHECK(m == std::vector<int>{0, 2, 0});
  index.clear_instance(1);
  index.match(h, m);
  CHECK(m == std::vector<int>{0, 0, 0});
}

TEST_CASE("a match prepared ahead is used only while nothing has changed", "[router][threads]") {
  KvEventIndex index(3, 64);
  const auto h = hashes_of(0, 4), other = hashes_of(1000, 4);
  const auto stored = [&](int instance, uint64_t hash, bool first) {
    index.apply(instance, KvEvent{KvEvent::Kind::BlockStored, hash, 0, 16, first});
  };
  for (int b = 0; b < 4; ++b) stored(0, h[b], b == 0);
  for (int b = 0; b < 2; ++b) stored(1, other[b], b == 0);
  // Prepared, then asked for the same request on the same index: reused.
  index.prepare(7, h);
  CHECK(index.match(7, h) == std::vector<int>{4, 0, 0});
  CHECK(index.num_reused() == 1);
  // Used once: asked again, it is computed.
  CHECK(index.match(7, h) == std::vector<int>{4, 0, 0});
  CHECK(index.num_reused() == 1);
  // An event since: the fresh answer, not the prepared one.
  index.prepare(7, h);
  for (int b = 0; b < 4; ++b) stored(2, h[b], b == 0);
  CHECK(index.match(7, h) == std::vector<int>{4, 0, 4});
  CHECK(index.num_reused() == 1);
  // Another request, or the same id with another chain: computed.
  index.prepare(7, h);
  CHECK(index.match(8, other) == std::vector<int>{0, 2, 0});
  index.prepare(7, h);
  CHECK(index.match(7, other) == std::vector<int>{0, 2, 0});
  CHECK(index.num_reused() == 1);
}

TEST_CASE("round_robin and random spread requests over every instance", "[router]") {
  std::vector<InstanceLoad> loads(4);
  const auto h = hashes_of(0, 2);
  auto rr = router("round_robin");
  for (int k = 0; k < 8; ++k) CHECK(route(*rr, h, loads) == k % 4);
  auto rnd = router("random");
  std::vector<int> count(4, 0);
  for (int k = 0; k < 4000; ++k) ++count[route(*rnd, h, loads)];
  for (int c : count) CHECK(c == Approx(1000).margin(120));
}

TEST_CASE("least_loaded picks the fewest requests then the lowest KV usage", "[router]") {
  std::vector<InstanceLoad> loads(4);
  loads[0].num_running = 5;
  loads[1].num_waiting = 3;
  loads[2].num_running = 2;
  loads[2].kv_usage = 0.9;
  loads[3].num_running = 2;
  loads[3].kv_usage = 0.1;
  auto r = router("least_loaded");
  CHECK(route(*r, hashes_of(0, 2), loads) == 3);
}

TEST_CASE("prefix routers pick the instance holding the prefix", "[router]") {
  const auto prefix = hashes_of(100, 8);
  std::vector<InstanceLoad> loads(4);
  loads[2].num_running = 3;  // the holder is a little busier: the cache still wins
  for (const std::string type : {"prefix_precise", "weighted"}) {
    auto r = router(type);
    store(*r, 2, prefix);
    INFO(type);
    CHECK(route(*r, prefix, loads) == 2);
    CHECK(route(*r, hashes_of(5000, 8), loads) != 2);  // an unknown prefix goes elsewhere
  }
  for (const std::string type : {"prefix_approx", "cache_aware"}) {
    auto r = router(type);
    const int first = route(*r, prefix, loads);  // learns from its own decision
    INFO(type);
    for (int k = 0; k < 5; ++k) CHECK(route(*r, prefix, loads) == first);
  }
}

TEST_CASE("prefix_precise forgets an evicted prefix and prefix_approx does not", "[router]") {
  const auto prefix = hashes_of(100, 8);
  std::vector<InstanceLoad> loads(4);
  auto precise = router("prefix_precise");
  store(*precise, 1, prefix);
  CHECK(route(*precise, prefix, loads) == 1);
  precise->on_kv_event(1, KvEvent{KvEvent::Kind::BlockRemoved, prefix[0], 0, 0, true});  // head evicted
  loads[1].num_running = 1;  // now merely busier
  CHECK(route(*precise, prefix, loads) != 1);

  auto approx = router("prefix_approx");
  std::vector<InstanceLoad> idle(4);
  const int chosen = route(*approx, prefix, idle);
  // The instance evicts it, but the approximate router hears nothing.
  std::vector<InstanceLoad> busier = idle;
  busier[chosen].num_running = 1;
  CHECK(route(*approx, prefix, busier) == chosen);
}

TEST_CASE("prefix_approx forgets the least recently routed blocks beyond its capacity", "[router]") {
  const auto a = hashes_of(0, 8), b = hashes_of(9000, 8);
  RoutedBlocksLru lru(1, 8);
  lru.record(0, a);
  lru.record(0, b);  // capacity 8: b pushes a out
  std::vector<int> m;
  lru.index().match(a, m);
  CHECK(m[0] == 0);
  lru.index().match(b, m);
  CHECK(m[0] == 8);
  RoutedBlocksLru partial(1, 10);
  partial.record(0, a);
  partial.record(0, hashes_of(9000, 4));  // 12 blocks routed: a's tail goes first, its head stays
  partial.index().match(a, m);
  CHECK(m[0] == 6);

  auto r = router("prefix_approx", 2, 0, {{"router.approx_capacity_blocks", "8"}});
  std::vector<InstanceLoad> loads(2);
  const int ia = route(*r, a, loads);
  loads[ia].num_running = 1;
  CHECK(route(*r, a, loads) == ia);  // remembered despite the load
}

TEST_CASE("cache_aware falls back to the shortest queue under imbalance", "[router]") {
  auto r = router("cache_aware", 3, 1000,
                  {{"router.balance_abs_threshold", "4"}, {"router.balance_rel_threshold", "1.5"}});
  const auto prefix = hashes_of(7, 6);
  std::vector<InstanceLoad> loads(3);
  const int home = route(*r, prefix, loads);
  CHECK(route(*r, prefix, loads) == home);  // balanced: the cache wins
  loads[home].num_running = 10;             // 10 - 0 > 4 and 10 > 0 * 1.5: imbalanced
  loads[(home + 1) % 3].num_running = 1;
  const int fallback = route(*r, prefix, loads);
  CHECK(fallback == (home + 2) % 3);        // the shortest queue
  loads[(home + 1) % 3].num_running = 8;
  loads[(home + 2) % 3].num_running = 8;    // 10 vs 8: a gap of 2 <= 4 is balanced again
  CHECK(route(*r, prefix, loads) == home);
}

TEST_CASE("cache_aware sends unmatched prompts to the smallest tree", "[router]") {
  auto r = router("cache_aware", 2, 1000);
  std::vector<InstanceLoad> loads(2);
  const int first = route(*r, hashes_of(0, 10), loads);
  CHECK(route(*r, hashes_of(50000, 2), loads) != first);  // the other tree is empty
}

TEST_CASE("weighted trades prefix hits against queue depth as its weights say", "[router]") {
  const auto prefix = hashes_of(100, 4);
  std::vector<InstanceLoad> loads(2);
  loads[0].num_waiting = 10;  // holder of the prefix, with the longest queue
  auto prefix_heavy = router("weighted", 2, 0);  // 3 * 1 + 2 * 0 + 2 * 1 = 5 > 0 + 2 * 1 + 2 * 1 = 4
  store(*prefix_heavy, 0, prefix);
  CHECK(route(*prefix_heavy, prefix, loads) == 0);
  auto queue_heavy = router("weighted", 2, 0, {{"router.weight_prefix", "1.0"}});  // 1 + 0 + 2 = 3 < 4: the queue wins
  store(*queue_heavy, 0, prefix);
  CHECK(route(*queue_heavy, prefix, loads) == 1);
}

TEST_CASE("an unknown router type names the key", "[router]") {
  CHECK_THROWS_WITH(router("telepathic"), Catch::Contains("router.type") && Catch::Contains("telepathic"));
}

TEST_CASE("PrefixIndex matches a plain reference at any fleet size", "[router][scale]") {
  // The reference: hash -> set of instances, the longest chain walked instance by instance.
  for (const int n : {1, 3, 63, 64, 65, 130, 1024, 4160}) {
    INFO("instances " << n);
    PrefixIndex index(n, 64);
    std::map<uint64_t, std::set<int>> ref;
    Rng rng(static_cast<uint64_t>(n));
    std::vector<std::vector<uint64_t>> chains;
    for (int c = 0; c < 12; ++c) chains.push_back(hashes_of(1000 * c, 10));
    std::vector<int> got;
    for (int step = 0; step < 3000; ++step) {
      const auto& chain = chains[static_cast<int>(rng.below(12))];
      const int inst = static_cast<int>(rng.below(n));
      const int depth = 1 + static_cast<int>(rng.below(10));
      const double u = rng.uniform();
      if (u < 0.6) {
        for (int b = 0; b < depth; ++b) index.add(chain[b], inst, b == 0), ref[chain[b]].insert(inst);
      } else if (u < 0.95) {
        const int b = static_cast<int>(rng.below(10));
        const uint64_t h = chain[b];
        index.remove(h, inst, b == 0);
        ref[h].erase(inst);
      } else {
        index.clear_instance(inst);
        for (auto& [h, s] : ref) s.erase(inst);
      }
      if (step % 7) continue;
      const auto& query = chains[static_cast<int>(rng.below(12))];
      index.match(query, got);
      REQUIRE(static_cast<int>(got.size()) == n);
      for (int i = 0; i < n; ++i) {
        int len = 0;
        while (len < static_cast<int>(query.size()) && ref[query[len]].count(i)) ++len;
        if (got[i] != len) FAIL("instance " << i << " matched " << got[i] << " blocks, the reference " << len);
      }
    }
    // for_each reports exactly the reference's holders.
    std::map<uint64_t, std::set<int>> seen;
    index.for_each([&](uint64_t h, const InstanceSet& s) { s.for_each([&](int i) { seen[h].insert(i); }); });
    for (auto it = ref.begin(); it != ref.end();) it = it->second.empty() ? ref.erase(it) : std::next(it);
    CHECK(seen == ref);
  }
}
