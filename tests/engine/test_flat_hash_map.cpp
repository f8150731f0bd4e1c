// FlatHashMap64 against std::unordered_map over random inserts and erases
// (keys with colliding low bits included, so probe runs and backward shifts happen).
#include <catch2/catch.hpp>
#include <unordered_map>

#include "engine/flat_hash_map.h"
#include "engine/common/rng.h"

using namespace testbed;

TEST_CASE("FlatHashMap64 behaves as a map under random inserts and erases", "[flat_hash_map][property]") {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Rng rng(seed);
    FlatHashMap64<int> map;
    std::unordered_map<uint64_t, int> ref;
    for (int op = 0; op < 20000; ++op) {
      // Few distinct low bits: many keys share a home slot.
      const uint64_t key = ((1 + rng.below(64)) << 20) | rng.below(8);  // never 0, the empty key
      if (rng.below(3) == 0) {
        CHECK(map.erase(key) == (ref.erase(key) == 1));
      } else {
        const int v = static_cast<int>(rng.below(1000));
        map[key] = v;
        ref[key] = v;
      }
      REQUIRE(map.size() == ref.size());
    }
    for (const auto& [k, v] : ref) {
      const int* got = map.find(k);
      REQUIRE(got);
      CHECK(*got == v);
    }
    size_t visited = 0;
    map.for_each([&](uint64_t k, int& v) {
      ++visited;
      CHECK(ref.at(k) == v);
    });
    CHECK(visited == ref.size());
    map.clear();
    CHECK(map.empty());
    CHECK_FALSE(map.contains(ref.begin()->first));
  }
}
