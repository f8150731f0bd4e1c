// BlockHashTable against std::unordered_map: random registrations and
// evictions of blocks under hashes whose low bits collide (long probe runs,
// backward shifts across the table's end) and hashes that share their low 32
// bits (the slot's tag), which only the block's full hash tells apart.
#include <catch2/catch.hpp>
#include <unordered_map>
#include <vector>

#include "engine/block_hash_table.h"
#include "engine/common/rng.h"

using namespace testbed;

TEST_CASE("BlockHashTable behaves as a map from hashes to blocks", "[block_hash_table][property]") {
  constexpr int kBlocks = 200;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Rng rng(seed);
    BlockHashTable table(kBlocks);
    REQUIRE(table.capacity() >= 3 * kBlocks);
    std::vector<uint64_t> hash_of_block(kBlocks, 0);  // the blocks' records: the hash each is registered under
    std::vector<bool> registered(kBlocks, false);
    std::unordered_map<uint64_t, int32_t> ref;
    const auto hash_of = [&](int32_t b) { return hash_of_block[b]; };
    const size_t last_home = table.capacity() - 1;
    for (int op = 0; op < 40000; ++op) {
      // Homes crowd the table's first and last slots (runs wrap around), and
      // the upper 32 bits vary over few values: distinct hashes share a tag.
      const uint64_t low = rng.below(2) ? rng.below(6) : last_home - rng.below(6);
      const uint64_t hash = (rng.below(4) << 32) | (low + (rng.below(3) << 20));
      const int32_t b = static_cast<int32_t>(rng.below(kBlocks));
      if (rng.below(2) == 0) {
        // Evict block b, as the cache does: only a registered block, under its own hash.
        if (!registered[b]) continue;
        CHECK(table.erase(hash_of_block[b], b));
        ref.erase(hash_of_block[b]);
        registered[b] = false;
      } else {
        // Register block b under `hash` when neither is taken (the cache's commit).
        if (registered[b]) continue;
        const bool absent = ref.count(hash) == 0;
        const uint64_t old_hash = hash_of_block[b];
        hash_of_block[b] = hash;  // the cache writes the record once the table takes it; before is the same here
        CHECK(table.insert_new(hash, b, hash_of) == absent);
        if (absent) {
          ref[hash] = b;
          registered[b] = true;
        } else {
          hash_of_block[b] = old_hash;
        }
      }
      REQUIRE(table.size() == ref.size());
      const uint64_t probe = (rng.below(4) << 32) | (rng.below(2) ? rng.below(6) : last_home - rng.below(6));
      const auto it = ref.find(probe);
      REQUIRE(table.find(probe, hash_of) == (it == ref.end() ? -1 : it->second));
    }
    for (const auto& [h, b] : ref) REQUIRE(table.find(h, hash_of) == b);
    // An unregistered block is not erased, even under a registered block's hash.
    if (!ref.empty()) {
      const auto [h, b] = *ref.begin();
      CHECK_FALSE(table.erase(h, (b + 1) % kBlocks));
      CHECK(table.find(h, hash_of) == b);
    }
    size_t visited = 0;
    table.for_each([&](int32_t b) {
      ++visited;
      CHECK(registered[b]);
      CHECK(ref.at(hash_of_block[b]) == b);
    });
    CHECK(visited == ref.size());
    table.clear();
    CHECK(table.empty());
    if (!ref.empty()) CHECK(table.find(ref.begin()->first, hash_of) == -1);
  }
}

TEST_CASE("BlockHashTable refuses more entries than it was made for", "[block_hash_table]") {
  BlockHashTable table(2);
  std::vector<uint64_t> hashes = {11, 22, 33};
  const auto hash_of = [&](int32_t b) { return hashes[b]; };
  CHECK(table.insert_new(11, 0, hash_of));
  CHECK(table.insert_new(22, 1, hash_of));
  CHECK_THROWS_AS(table.insert_new(33, 2, hash_of), std::logic_error);
  CHECK(table.size() == 2);
}

TEST_CASE("BlockHashTable refuses a block count whose slots its tags cannot address", "[block_hash_table]") {
  // Refused before anything is allocated (the run's config check names cache.num_blocks first).
  CHECK_THROWS_AS(BlockHashTable(BlockHashTable::kMaxEntries + 1), std::length_error);
  CHECK(BlockHashTable(1000).capacity() == 4096);
}
