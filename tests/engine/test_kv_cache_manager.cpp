// KvCacheManager: a property test over random operation sequences, and the
// prefix-cache rules (hit cap, LRU eviction, events).
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <set>

#include "engine/block_hash.h"
#include "engine/kv_cache_manager.h"
#include "support/kv_prompts.h"
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
      // A chain's first block, and only it, hangs from the root (these tests use no cache salt).
      if (e.first_block != (e.parent_hash == root_block_hash(0))) ++errors_;
      first_[e.block_hash] = e.first_block;
    } else if (e.kind == KvEvent::Kind::BlockRemoved) {
      if (stored_.erase(e.block_hash) != 1) ++errors_;
      if (first_[e.block_hash] != e.first_block) ++errors_;  // removed as what it was stored as
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
  std::map<uint64_t, bool> first_;  // every hash ever stored: whether it opens its chain
  int errors_ = 0;
};

}  // namespace

TEST_CASE("block manager invariants hold over random operation sequences", "[kv_cache][property]") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    const int block_size = 1 + static_cast<int>(rng.below(16));
    const int num_blocks = 8 + static_cast<int>(rng.below(64));
    KvCacheManager kv(num_blocks, block_size, /*prefix_cache=*/true);
    EventLedger ledger(kv);
    // A few shared prefixes so lookups hit.
    const std::vector<std::vector<int32_t>> prefixes = test::shared_prefixes(rng, block_size, 50);

    std::vector<std::unique_ptr<Sequence>> live;
    int64_t next_id = 0;
    for (int op = 0; op < 400; ++op) {
      const uint64_t what = rng.below(3);
      if (what == 0 || live.empty()) {  // admit a new sequence with its prefix hit
        auto seq = test::prompt_sharing(rng, prefixes, block_size, 50, next_id++);
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

namespace {

// One cache and what its blocks hold: the token each write put in each slot
// (by block and slot), and a ledger of its events that also rehashes every
// block it registers from those contents, so a block holding a rolled-back
// proposed token (or a partial copy) cannot be registered unnoticed.
struct Side {
  Side(int num_blocks, int block_size)
      : kv(std::make_unique<KvCacheManager>(num_blocks, block_size, true)), ledger(*kv), block_size(block_size) {}
  std::unique_ptr<KvCacheManager> kv;
  EventLedger ledger;
  std::map<std::pair<int32_t, int>, int32_t> shadow;
  int block_size;
  int bad_contents = 0, registered = 0;

  // A step computed positions [from, from + tokens.size()) of seq.
  void write(const Sequence& seq, int from, const std::vector<int32_t>& tokens) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const int p = from + static_cast<int>(i);
      shadow[{seq.block_table[p / block_size], p % block_size}] = tokens[i];
    }
  }
  void check_events() {
    for (const KvEvent& e : kv->events()) {
      if (e.kind != KvEvent::Kind::BlockStored) continue;
      ++registered;
      const int b = kv->cached_block(e.block_hash);
      std::vector<int32_t> held(block_size, -1);
      for (int s = 0; s < block_size; ++s)
        if (auto it = shadow.find({b, s}); it != shadow.end()) held[s] = it->second;
      if (b < 0 || hash_block(e.parent_hash, held.data(), block_size) != e.block_hash) ++bad_contents;
    }
    ledger.drain();
  }
};

std::vector<int32_t> slice(const Sequence& seq, int from, int to) {
  return std::vector<int32_t>(seq.tokens().begin() + from, seq.tokens().begin() + to);
}

}  // namespace

TEST_CASE("lookahead, truncate, export and import keep every invariant over random operations",
          "[kv_cache][property]") {
  int64_t totals[4] = {0, 0, 0, 0};  // speculations, rollbacks, transfers, reused blocks
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed * 7919);
    const int block_size = 1 + static_cast<int>(rng.below(8));
    Side sides[2] = {Side(16 + static_cast<int>(rng.below(48)), block_size),
                     Side(16 + static_cast<int>(rng.below(48)), block_size)};
    const std::vector<std::vector<int32_t>> prefixes = test::shared_prefixes(rng, block_size, 40);
    struct Live {
      std::unique_ptr<Sequence> seq;
      int side;
    };
    std::vector<Live> live;
    int64_t next_id = 0;
    for (int op = 0; op < 500; ++op) {
      INFO("seed " << seed << " op " << op);
      const uint64_t what = rng.below(5);
      if (what == 0 || live.empty()) {  // admit with a prefix hit
        const int side = static_cast<int>(rng.below(2));
        KvCacheManager& kv = *sides[side].kv;
        auto seq = test::prompt_sharing(rng, prefixes, block_size, 40, next_id++);
        const PrefixHit hit = kv.find_cached_prefix(*seq);
        const int n = 1 + static_cast<int>(rng.below(seq->num_tokens() - hit.num_tokens()));
        if (kv.allocate(*seq, n, hit)) {
          sides[side].write(*seq, hit.num_tokens(), slice(*seq, hit.num_tokens(), hit.num_tokens() + n));
          seq->num_computed_tokens += n;
          kv.commit_full_blocks(*seq);
          live.push_back({std::move(seq), side});
        }
      } else if (what == 1) {  // compute the rest of a sequence's known tokens
        Live& l = live[rng.below(live.size())];
        Sequence& seq = *l.seq;
        KvCacheManager& kv = *sides[l.side].kv;
        if (seq.num_computed_tokens == seq.num_tokens()) seq.append_token(static_cast<int32_t>(rng.below(40)));
        const int from = seq.num_computed_tokens, n = seq.num_tokens() - from;
        if (kv.allocate(seq, n)) {
          sides[l.side].write(seq, from, slice(seq, from, from + n));
          seq.num_computed_tokens += n;
          kv.commit_full_blocks(seq);
        }
      } else if (what == 2) {  // a decode step that verifies k proposed tokens and rejects some
        Live& l = live[rng.below(live.size())];
        Sequence& seq = *l.seq;
        KvCacheManager& kv = *sides[l.side].kv;
        if (seq.num_computed_tokens == seq.num_tokens()) seq.append_token(static_cast<int32_t>(rng.below(40)));
        if (seq.num_computed_tokens != seq.num_tokens() - 1) continue;
        const int c = seq.num_computed_tokens, k = 1 + static_cast<int>(rng.below(4));
        std::vector<int32_t> drafts;
        for (int j = 0; j < k; ++j) drafts.push_back(static_cast<int32_t>(rng.below(40)));
        if (!kv.allocate(seq, 1, k)) continue;
        REQUIRE(static_cast<int>(seq.block_table.size()) >= kv.blocks_needed(c + 1 + k));
        std::vector<int32_t> written = slice(seq, c, c + 1);
        written.insert(written.end(), drafts.begin(), drafts.end());
        sides[l.side].write(seq, c, written);  // the rejected drafts' K/V lands in the cache too
        const int accepted = static_cast<int>(rng.below(k + 1));
        for (int j = 0; j < accepted; ++j) seq.append_token(drafts[j]);
        seq.append_token(static_cast<int32_t>(40 + rng.below(40)));  // the target's own next token
        seq.num_computed_tokens = c + 1 + accepted;
        if (accepted < k) {
          kv.truncate(seq, seq.num_computed_tokens);
          REQUIRE(static_cast<int>(seq.block_table.size()) == kv.blocks_needed(seq.num_computed_tokens));
          ++totals[1];
        }
        kv.commit_full_blocks(seq);
        ++totals[0];
      } else if (what == 3) {  // finish one
        const size_t i = rng.below(live.size());
        sides[live[i].side].kv->free(*live[i].seq);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {  // hand a sequence over to the other cache
        const size_t i = rng.below(live.size());
        Live& l = live[i];
        Sequence& seq = *l.seq;
        if (seq.num_computed_tokens == 0) continue;
        Side& from = sides[l.side];
        Side& to = sides[1 - l.side];
        const KvExport e = from.kv->export_blocks(seq);
        REQUIRE(seq.block_table.empty());
        REQUIRE(from.kv->num_exports() == 1);
        KvImport plan;
        if (to.kv->import_blocks(seq, e, plan)) {
          REQUIRE(plan.source_blocks.size() == plan.dest_blocks.size());
          REQUIRE(plan.num_reused_blocks + static_cast<int>(plan.dest_blocks.size()) ==
                  to.kv->blocks_needed(e.num_tokens));
          for (size_t b = 0; b < plan.dest_blocks.size(); ++b)
            for (int s = 0; s < block_size; ++s)
              if (auto it = from.shadow.find({plan.source_blocks[b], s}); it != from.shadow.end())
                to.shadow[{plan.dest_blocks[b], s}] = it->second;
          to.kv->commit_full_blocks(seq);
          from.kv->release_export(seq.id());
          l.side = 1 - l.side;
          ++totals[2];
          totals[3] += plan.num_reused_blocks;
        } else {  // no room there: the transfer is abandoned
          from.kv->release_export(seq.id());
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        }
      }
      for (int s = 0; s < 2; ++s) {
        INFO("side " << s);
        std::vector<const Sequence*> views;
        for (const Live& l : live)
          if (l.side == s) views.push_back(l.seq.get());
        sides[s].check_events();
        REQUIRE(sides[s].kv->check_invariants(views).empty());
        REQUIRE(sides[s].kv->num_free_blocks() + sides[s].kv->num_used_blocks() == sides[s].kv->num_blocks());
        REQUIRE(sides[s].ledger.errors() == 0);
        REQUIRE(sides[s].bad_contents == 0);
        for (int b = 0; b < sides[s].kv->num_blocks(); ++b) REQUIRE(sides[s].kv->ref_count(b) >= 0);
      }
    }
    for (Live& l : live) sides[l.side].kv->free(*l.seq);
    live.clear();
    for (Side& side : sides) {
      side.check_events();
      CHECK(side.kv->num_used_blocks() == 0);
      CHECK(side.kv->num_exports() == 0);
      CHECK(side.kv->check_invariants({}).empty());
      CHECK(static_cast<int>(side.ledger.stored().size()) == side.kv->num_cached_blocks());
      CHECK(side.registered > 0);
    }
  }
  // The operations this test is about happened, many times.
  CHECK(totals[0] > 500);
  CHECK(totals[1] > 200);
  CHECK(totals[2] > 200);
  CHECK(totals[3] > 0);
}

TEST_CASE("truncate cannot cut into registered blocks and frees the tail first", "[kv_cache]") {
  KvCacheManager kv(8, 4, true);
  auto a = test::kv_sequence(0, {1, 2, 3, 4, 5, 6});
  REQUIRE(kv.allocate(*a, 6, 4));  // room for 6 tokens and 4 proposed ones: 3 blocks
  CHECK(a->block_table.size() == 3);
  a->num_computed_tokens = 6;
  kv.commit_full_blocks(*a);
  CHECK(a->num_committed_blocks == 1);
  kv.truncate(*a, 6);
  CHECK(a->block_table.size() == 2);
  CHECK(kv.num_free_blocks() == 6);
  CHECK_THROWS_AS(kv.truncate(*a, 3), std::logic_error);  // into the registered first block
  kv.truncate(*a, 4);
  CHECK(a->block_table.size() == 1);
  CHECK(a->num_computed_tokens == 4);
  CHECK(kv.check_invariants({a.get()}).empty());
}

TEST_CASE("an import reuses the blocks the receiver holds and waits when it has no room", "[kv_cache]") {
  KvCacheManager sender(16, 4, true), receiver(3, 4, true);
  auto a = test::kv_sequence(0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  REQUIRE(sender.allocate(*a, 10));
  a->num_computed_tokens = 10;
  sender.commit_full_blocks(*a);
  // The receiver already holds the first block (another sequence computed it there).
  auto b = test::kv_sequence(1, {1, 2, 3, 4, 99});
  REQUIRE(receiver.allocate(*b, 5));
  b->num_computed_tokens = 5;
  receiver.commit_full_blocks(*b);
  const KvExport e = sender.export_blocks(*a);
  CHECK(e.num_tokens == 10);
  CHECK(e.blocks.size() == 3);
  CHECK(e.block_hashes.size() == 2);
  KvImport plan;
  CHECK_FALSE(receiver.import_blocks(*a, e, plan));  // 2 new blocks needed, 1 free
  CHECK(a->block_table.empty());
  receiver.free(*b);
  REQUIRE(receiver.import_blocks(*a, e, plan));
  CHECK(plan.num_reused_blocks == 1);
  CHECK(plan.source_blocks == std::vector<int32_t>{e.blocks[1], e.blocks[2]});
  CHECK(a->num_computed_tokens == 10);
  CHECK(sender.num_used_blocks() == 3);  // held until the transfer is released
  sender.release_export(0);
  CHECK(sender.num_used_blocks() == 0);
  CHECK(sender.check_invariants({}).empty());
  CHECK(receiver.check_invariants({a.get()}).empty());
  CHECK_THROWS_AS(sender.release_export(0), std::logic_error);
}

TEST_CASE("a prefix hit always leaves one token to compute", "[kv_cache]") {
  KvCacheManager kv(16, 4, true);
  auto a = test::kv_sequence(0, {1, 2, 3, 4, 5, 6, 7, 8});  // exactly two blocks
  REQUIRE(kv.allocate(*a, 8));
  a->num_computed_tokens = 8;
  kv.commit_full_blocks(*a);
  CHECK(kv.num_cached_blocks() == 2);
  auto same = test::kv_sequence(1, {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(kv.find_cached_prefix(*same).num_tokens() == 4);  // not 8: the last token must be computed
  auto longer = test::kv_sequence(2, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(kv.find_cached_prefix(*longer).num_tokens() == 8);
  auto other = test::kv_sequence(3, {9, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(kv.find_cached_prefix(*other).num_tokens() == 0);
}

TEST_CASE("cached blocks are evicted lazily and least recently freed first", "[kv_cache]") {
  KvCacheManager kv(4, 2, true);
  EventLedger ledger(kv);
  auto a = test::kv_sequence(0, {1, 2, 3, 4});
  REQUIRE(kv.allocate(*a, 4));
  a->num_computed_tokens = 4;
  kv.commit_full_blocks(*a);
  kv.free(*a);
  CHECK(kv.num_free_blocks() == 4);
  CHECK(kv.num_cached_blocks() == 2);  // still cached while free
  // Two anonymous blocks are taken before any cached one.
  auto b = test::kv_sequence(1, {9, 9, 9, 9});
  REQUIRE(kv.allocate(*b, 4));
  CHECK(kv.num_cached_blocks() == 2);
  CHECK(ledger.stored().size() == 2);
  kv.free(*b);
  // Needing three blocks evicts a's tail block first, then nothing else.
  auto c = test::kv_sequence(2, {7, 7, 7, 7, 7, 7});
  REQUIRE(kv.allocate(*c, 6));
  CHECK(kv.num_cached_blocks() == 1);
  auto again = test::kv_sequence(3, {1, 2, 3, 4, 5});
  CHECK(kv.find_cached_prefix(*again).num_tokens() == 2);  // a's first block survived
  CHECK(ledger.errors() == 0);
}

TEST_CASE("a failed allocation leaves the cache unchanged", "[kv_cache]") {
  KvCacheManager kv(2, 4, true);
  auto a = test::kv_sequence(0, std::vector<int32_t>(12, 1));
  CHECK_FALSE(kv.allocate(*a, 12));
  CHECK(kv.num_free_blocks() == 2);
  CHECK(a->block_table.empty());
}

TEST_CASE("clear_cache forgets every cached block and says so once", "[kv_cache]") {
  KvCacheManager kv(8, 2, true);
  EventLedger ledger(kv);
  auto a = test::kv_sequence(0, {1, 2, 3, 4, 5});
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
  auto b = test::kv_sequence(1, {1, 2, 3, 4, 5});
  CHECK(kv.find_cached_prefix(*b).num_tokens() == 0);
  kv.free(*a);
  CHECK(kv.check_invariants({}).empty());
  CHECK(ledger.errors() == 0);
}
