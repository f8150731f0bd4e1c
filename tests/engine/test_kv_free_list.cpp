// The KV cache's free list against a plain doubly linked list (vLLM's
// FreeKVCacheBlockQueue): over random admits with prefix hits (cached free
// blocks leave the middle), growth with lookahead, truncation, clear_cache
// and frees, every allocation takes exactly the blocks at the reference's
// head, in order.
#include <catch2/catch.hpp>
#include <list>
#include <map>
#include <memory>
#include <set>

#include "engine/common/rng.h"
#include "engine/kv_cache_manager.h"
#include "support/kv_prompts.h"

using namespace testbed;

namespace {

// The free list as a doubly linked list of block ids: the order the
// cache's two arrays with dead entries must reproduce exactly.
class ReferenceFreeList {
 public:
  explicit ReferenceFreeList(int num_blocks) {
    for (int b = 0; b < num_blocks; ++b) at_[b] = list_.insert(list_.end(), b);
  }
  void push_front(int b) { at_[b] = list_.insert(list_.begin(), b); }
  void push_back(int b) { at_[b] = list_.insert(list_.end(), b); }
  void remove(int b) {
    list_.erase(at_.at(b));
    at_.erase(b);
  }
  int pop() {
    const int b = list_.front();
    remove(b);
    return b;
  }
  size_t size() const { return list_.size(); }

 private:
  std::list<int> list_;
  std::map<int, std::list<int>::iterator> at_;
};

std::set<int> hashed_blocks(const KvCacheManager& kv) {
  std::set<int> out;
  kv.for_each_cached([&](uint64_t h) { out.insert(kv.cached_block(h)); });
  return out;
}

}  // namespace

TEST_CASE("blocks leave the free list in the order of a doubly linked LRU list", "[kv_cache][property]") {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    const int block_size = 1 + static_cast<int>(rng.below(8));
    const int num_blocks = 8 + static_cast<int>(rng.below(48));
    KvCacheManager kv(num_blocks, block_size, /*prefix_cache=*/true);
    ReferenceFreeList ref(num_blocks);
    const std::vector<std::vector<int32_t>> prefixes = test::shared_prefixes(rng, block_size, 50);
    // The blocks an allocation appended must be the reference's head, in order.
    auto expect_taken = [&](const Sequence& seq, size_t from) {
      for (size_t i = from; i < seq.block_table.size(); ++i) REQUIRE(seq.block_table[i] == ref.pop());
    };
    auto release = [&](Sequence& seq) {
      const std::set<int> hashed = hashed_blocks(kv);
      for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it)
        if (kv.ref_count(*it) == 1) {
          if (hashed.count(*it))
            ref.push_back(*it);
          else
            ref.push_front(*it);
        }
      kv.free(seq);
    };
    std::vector<std::unique_ptr<Sequence>> live;
    int64_t next_id = 0;
    for (int op = 0; op < 600; ++op) {
      INFO("seed " << seed << " op " << op);
      const uint64_t what = rng.below(9);
      if (what <= 2 || live.empty()) {  // admit, taking its prefix hit (cached free blocks leave the middle)
        auto seq = test::prompt_sharing(rng, prefixes, block_size, 50, next_id++);
        const PrefixHit hit = kv.find_cached_prefix(*seq);
        const int n = 1 + static_cast<int>(rng.below(seq->num_tokens() - hit.num_tokens()));
        if (!kv.can_allocate(*seq, n, hit)) continue;
        for (int32_t b : hit.blocks)
          if (kv.ref_count(b) == 0) ref.remove(b);
        REQUIRE(kv.allocate(*seq, n, hit));
        expect_taken(*seq, hit.blocks.size());
        seq->num_computed_tokens += n;
        kv.commit_full_blocks(*seq);
        live.push_back(std::move(seq));
      } else if (what <= 4) {  // extend one
        Sequence& seq = *live[rng.below(live.size())];
        if (seq.num_computed_tokens == seq.num_tokens()) seq.append_token(static_cast<int32_t>(rng.below(50)));
        const int n = seq.num_tokens() - seq.num_computed_tokens;
        const size_t had = seq.block_table.size();
        if (kv.allocate(seq, n, static_cast<int>(rng.below(2 * block_size)))) {
          expect_taken(seq, had);
          seq.num_computed_tokens += n;
          kv.commit_full_blocks(seq);
        }
      } else if (what == 5) {  // roll a sequence back to its registered blocks: its tail goes to the front
        Sequence& seq = *live[rng.below(live.size())];
        const int keep = seq.num_committed_blocks * block_size;
        for (int i = static_cast<int>(seq.block_table.size()) - 1; i >= kv.blocks_needed(keep); --i)
          if (kv.ref_count(seq.block_table[i]) == 1) ref.push_front(seq.block_table[i]);
        kv.truncate(seq, keep);
      } else if (what == 6 && rng.below(10) == 0) {  // forget the cache: cached free blocks keep their places
        kv.clear_cache();
      } else {  // finish one
        const size_t i = rng.below(live.size());
        release(*live[i]);
        live.erase(live.begin() + i);
      }
      REQUIRE(static_cast<int>(ref.size()) == kv.num_free_blocks());
      std::vector<const Sequence*> views;
      for (const auto& s : live) views.push_back(s.get());
      REQUIRE(kv.check_invariants(views).empty());
    }
    // Every free block, taken at once, comes off in the reference's order.
    if (kv.num_free_blocks() == 0) continue;
    auto all = test::kv_sequence(next_id++, std::vector<int32_t>(static_cast<size_t>(kv.num_free_blocks()) * block_size, 7));
    REQUIRE(kv.allocate(*all, all->num_tokens(), PrefixHit{}));
    expect_taken(*all, 0);
    CHECK(ref.size() == 0);
  }
}

TEST_CASE("a block's free generation wrapping leaves no earlier entry to match it", "[kv_cache]") {
  // Generations are 28 bits: the 2^28-th free of a block reuses a number an
  // entry of its first lap may still carry, dead in the middle of the list.
  // 64 blocks: the list's arrays have room, so nothing compacts them meanwhile.
  constexpr int kBlocks = 64;
  KvCacheManager kv(kBlocks, 4, /*prefix_cache=*/true);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  auto a = test::kv_sequence(0, tokens);
  REQUIRE(kv.allocate(*a, 8, PrefixHit{}));
  const int b = a->block_table[0];
  a->num_computed_tokens = 8;
  kv.commit_full_blocks(*a);
  kv.set_free_generation(b, KvCacheManager::kMaxFreeGeneration);
  kv.free(*a);  // b's entry has generation 0
  auto again = test::kv_sequence(1, tokens);
  const PrefixHit hit = kv.find_cached_prefix(*again);
  REQUIRE(hit.blocks.size() == 1);
  REQUIRE(hit.blocks[0] == b);
  REQUIRE(kv.allocate(*again, 4, hit));  // b leaves the middle of the list: its entry is dead
  kv.set_free_generation(b, KvCacheManager::kMaxFreeGeneration);
  kv.free(*again);  // generation 0 again: the dead entry must not come back to life
  CHECK(kv.check_invariants({}) == "");
  CHECK(kv.num_free_blocks() == kBlocks);
  auto all = test::kv_sequence(2, std::vector<int32_t>(4 * kBlocks, 9));
  REQUIRE(kv.allocate(*all, 4 * kBlocks, PrefixHit{}));
  const std::set<int> taken(all->block_table.begin(), all->block_table.end());
  CHECK(taken.size() == static_cast<size_t>(kBlocks));  // each block once
  CHECK(kv.check_invariants({all.get()}) == "");
}
