// KvCacheManager: a property test over random operation sequences, and the
// prefix-cache rules (hit cap, LRU eviction, events).
#include <catch2/catch.hpp>
#include <memory>
#include <set>

#include "engine/kv_cache_manager.h"
#include "engine/common/rng.h"

using namespace testbed;

namespace {

// Checks the event stream: a removal matches an earlier store, no double store.
class EventLedger {
 public:
  explicit EventLedger(KvCacheManager& kv) : kv_(kv) { kv.set_record_events(true); }
  // Takes the events the cache recorded since the last call.
  void drain() {
    for (const KvEvent& e : kv_.events()) on_kv_event(e);
    kv_.clear_events();
  }
  void on_kv_event(const KvEvent& e) {
    if (e.kind == KvEvent::Kind::BlockStored) {
      if (!stored_.insert(e.block_hash).second) ++errors_;
    } else if (e.kind == KvEvent::Kind::BlockRemoved) {
      if (stored_.erase(e.block_hash) != 1) ++errors_;
    } else {
      stored_.clear();
    }
  }
  const std::set<uint64_t>& stored() {
    drain();
    return stored_;
  }
  int errors() {
    drain();
    return errors_;
  }

 private:
  KvCacheManager& kv_;
  std::set<uint64_t> stored_;
  int errors_ = 0;
};

std::unique_ptr<Sequence> make_seq(int64_t id, std::vector<int32_t> tokens) {
  Request r;
  r.id = id;
  r.prompt = std::move(tokens);
  r.max_output_tokens = 8;
  return std::make_unique<Sequence>(std::move(r));
}

}  // namespace

TEST_CASE("block manager invariants hold over random operation sequences", "[kv_cache][property]") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    const int block_size = 1 + static_cast<int>(rng.below(16));
    const int num_blocks = 8 + static_cast<int>(rng.below(64));
    KvCacheManager kv(num_blocks, block_size, /*prefix_cache=*/true);
    EventLedger ledger(kv);
    // A few shared prefixes so lookups hit.
    std::vector<std::vector<int32_t>> prefixes(3);
    for (auto& p : prefixes)
      for (int i = 0; i < 3 * block_size; ++i) p.push_back(static_cast<int32_t>(rng.below(50)));

    std::vector<std::unique_ptr<Sequence>> live;
    int64_t next_id = 0;
    for (int op = 0; op < 400; ++op) {
      const uint64_t what = rng.below(3);
      if (what == 0 || live.empty()) {  // admit a new sequence with its prefix hit
        std::vector<int32_t> tokens = prefixes[rng.below(prefixes.size())];
        tokens.resize(tokens.size() - rng.below(block_size * 2));
        for (int i = 0, n = 1 + static_cast<int>(rng.below(3 * block_size)); i < n; ++i)
          tokens.push_back(static_cast<int32_t>(rng.below(50)));
        auto seq = make_seq(next_id++, tokens);
        const PrefixHit hit = kv.find_cached_prefix(*seq);
        REQUIRE(hit.num_tokens() <= seq->num_tokens() - 1);
        const int n = 1 + static_cast<int>(rng.below(seq->num_tokens() - hit.num_tokens()));
        const int free_before = kv.num_free_blocks();
        if (kv.allocate(*seq, n, hit)) {
          REQUIRE(seq->num_computed_tokens == hit.num_tokens());
          seq->num_computed_tokens += n;
          kv.commit_full_blocks(*seq);
          live.push_back(std::move(seq));
        } else {
          REQUIRE(kv.num_free_blocks() == free_before);  // a failed allocation changes nothing
        }
      } else if (what == 1) {  // extend a live sequence (append tokens, compute them)
        Sequence& seq = *live[rng.below(live.size())];
        if (seq.num_computed_tokens == seq.num_tokens()) seq.append_token(static_cast<int32_t>(rng.below(50)));
        const int n = seq.num_tokens() - seq.num_computed_tokens;
        if (kv.allocate(seq, n)) {
          seq.num_computed_tokens += n;
          kv.commit_full_blocks(seq);
        }
      } else {  // finish one
        const size_t i = rng.below(live.size());
        kv.free(*live[i]);
        live.erase(live.begin() + i);
      }
      std::vector<const Sequence*> views;
      for (const auto& s : live) views.push_back(s.get());
      INFO("seed " << seed << " op " << op);
      REQUIRE(kv.check_invariants(views).empty());
      REQUIRE(kv.num_free_blocks() + kv.num_used_blocks() == kv.num_blocks());
      REQUIRE(ledger.errors() == 0);
    }
    for (auto& s : live) kv.free(*s);
    live.clear();
    CHECK(kv.num_used_blocks() == 0);
    CHECK(kv.check_invariants({}).empty());
    for (int b = 0; b < kv.num_blocks(); ++b) CHECK(kv.ref_count(b) == 0);
    // The router's view from events equals the cache's content.
    CHECK(static_cast<int>(ledger.stored().size()) == kv.num_cached_blocks());
    for (uint64_t h : ledger.stored()) CHECK(kv.is_cached(h));
  }
}

TEST_CASE("a prefix hit always leaves one token to compute", "[kv_cache]") {
  KvCacheManager kv(16, 4, true);
  auto a = make_seq(0, {1, 2, 3, 4, 5, 6, 7, 8});  // exactly two blocks
  REQUIRE(kv.allocate(*a, 8));
  a->num_computed_tokens = 8;
  kv.commit_full_blocks(*a);
  CHECK(kv.num_cached_blocks() == 2);
  auto same = make_seq(1, {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(kv.find_cached_prefix(*same).num_tokens() == 4);  // not 8: the last token must be computed
  auto longer = make_seq(2, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(kv.find_cached_prefix(*longer).num_tokens() == 8);
  auto other = make_seq(3, {9, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(kv.find_cached_prefix(*other).num_tokens() == 0);
}

TEST_CASE("cached blocks are evicted lazily and least recently freed first", "[kv_cache]") {
  KvCacheManager kv(4, 2, true);
  EventLedger ledger(kv);
  auto a = make_seq(0, {1, 2, 3, 4});
  REQUIRE(kv.allocate(*a, 4));
  a->num_computed_tokens = 4;
  kv.commit_full_blocks(*a);
  kv.free(*a);
  CHECK(kv.num_free_blocks() == 4);
  CHECK(kv.num_cached_blocks() == 2);  // still cached while free
  // Two anonymous blocks are taken before any cached one.
  auto b = make_seq(1, {9, 9, 9, 9});
  REQUIRE(kv.allocate(*b, 4));
  CHECK(kv.num_cached_blocks() == 2);
  CHECK(ledger.stored().size() == 2);
  kv.free(*b);
  // Needing three blocks evicts a's tail block first, then nothing else.
  auto c = make_seq(2, {7, 7, 7, 7, 7, 7});
  REQUIRE(kv.allocate(*c, 6));
  CHECK(kv.num_cached_blocks() == 1);
  auto again = make_seq(3, {1, 2, 3, 4, 5});
  CHECK(kv.find_cached_prefix(*again).num_tokens() == 2);  // a's first block survived
  CHECK(ledger.errors() == 0);
}

TEST_CASE("a failed allocation leaves the cache unchanged", "[kv_cache]") {
  KvCacheManager kv(2, 4, true);
  auto a = make_seq(0, std::vector<int32_t>(12, 1));
  CHECK_FALSE(kv.allocate(*a, 12));
  CHECK(kv.num_free_blocks() == 2);
  CHECK(a->block_table.empty());
}

TEST_CASE("clear_cache forgets every cached block and says so once", "[kv_cache]") {
  KvCacheManager kv(8, 2, true);
  EventLedger ledger(kv);
  auto a = make_seq(0, {1, 2, 3, 4, 5});
  REQUIRE(kv.allocate(*a, 5));
  a->num_computed_tokens = 5;
  kv.commit_full_blocks(*a);
  REQUIRE(kv.num_cached_blocks() == 2);
  REQUIRE(ledger.stored().size() == 2);
  kv.clear_cache();
  CHECK(kv.num_cached_blocks() == 0);
  CHECK(ledger.stored().empty());  // AllCleared reached the listener
  CHECK(kv.num_used_blocks() == 3);  // blocks in use keep their contents
  std::vector<const Sequence*> live{a.get()};
  CHECK(kv.check_invariants(live).empty());
  auto b = make_seq(1, {1, 2, 3, 4, 5});
  CHECK(kv.find_cached_prefix(*b).num_tokens() == 0);
  kv.free(*a);
  CHECK(kv.check_invariants({}).empty());
  CHECK(ledger.errors() == 0);
}
