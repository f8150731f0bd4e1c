// FlatHashMap64 against std::unordered_map over random inserts and erases
// (keys with colliding low bits included, so probe runs and backward shifts happen).
#include <catch2/catch.hpp>
#include <unordered_map>
#include <utility>
#include <vector>

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
      const uint64_t op_kind = rng.below(4);
      if (op_kind == 0) {
        CHECK(map.erase(key) == (ref.erase(key) == 1));
      } else if (op_kind == 1) {  // insert_new: only when absent, the present value kept
        const int v = static_cast<int>(rng.below(1000));
        const bool absent = ref.count(key) == 0;
        CHECK(map.insert_new(key, v) == absent);
        if (absent) ref[key] = v;
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

TEST_CASE("FlatHashMap64::insert_new leaves the table as contains + operator[] would, growth included", "[flat_hash_map]") {
  // Same keys into two maps, one each way: the same entries in the same table
  // order, so iteration (and anything reading it) cannot tell them apart.
  Rng rng(11);
  FlatHashMap64<int> a, b;
  for (int i = 0; i < 5000; ++i) {
    const uint64_t key = 1 + rng.below(1000);  // growth comes when most offered keys are present
    const int v = i;
    const bool inserted = a.insert_new(key, v);
    CHECK(inserted == !b.contains(key));
    if (inserted) b[key] = v;
    REQUIRE(a.size() == b.size());
    REQUIRE(a.capacity() == b.capacity());
  }
  std::vector<std::pair<uint64_t, int>> order_a, order_b;
  a.for_each([&](uint64_t k, int& v) { order_a.emplace_back(k, v); });
  b.for_each([&](uint64_t k, int& v) { order_b.emplace_back(k, v); });
  CHECK(order_a == order_b);
}
