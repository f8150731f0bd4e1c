// KvCacheManager: the paged KV cache's bookkeeping (no tensors here; executors
// own the memory, laid out as kv_layout.h says).
//
// Fixed-size blocks with reference counts; a block table per sequence. With the
// prefix cache on, every full block of final tokens is registered under its
// chained hash; a new sequence takes the longest chain of registered blocks
// instead of recomputing it (always leaving at least one prompt token to
// compute, so the step that finishes the prompt has logits to sample from).
// Blocks of finished sequences keep their hash on an LRU free list and are
// evicted lazily, only when an allocation needs a block. Blocks that hold
// nothing reusable go to the front of the free list so they are taken before
// any cached block.
//
// Verbs, as in nano-vllm and vLLM's allocate_slots:
//   find_cached_prefix, can_allocate / allocate(seq, n, hit)   admission
//   allocate(seq, num_new, num_lookahead)                      room for a step (and its proposed tokens)
//   truncate(seq, num_tokens)                                  roll rejected positions back
//   commit_full_blocks(seq)                                    register blocks of final tokens
//   free(seq)
//   export_blocks(seq) / release_export(id), import_blocks     what a KV transfer moves between engines
// Stores and evictions are recorded as KvEvents (when recording is on) for the
// engine to drain and publish after each step, as vLLM's engine drains them.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/common/load_ahead.h"
#include "engine/block_hash_table.h"
#include "engine/kv_event.h"
#include "engine/sequence.h"

namespace testbed {

class OptionTable;

struct CacheConfig {
  int block_size = 16;
  bool prefix_cache = true;
  int num_blocks = 0;                 // 0: derive from gpu_memory_fraction (simulated GPUs)
  double gpu_memory_fraction = 0.9;   // share of device memory for weights + KV
  void bind(OptionTable& table);
  void validate() const;
};

struct PrefixHit {
  std::vector<int32_t> blocks;  // physical ids of the cached leading blocks
  int num_tokens() const;
  int block_size = 0;
};

// A sequence's KV leaving this cache: the blocks stay referenced here until
// release_export(seq_id), so they cannot be reused while a transfer reads them.
struct KvExport {
  int64_t seq_id = -1;
  int num_tokens = 0;                 // tokens whose K/V the blocks hold
  int block_size = 0;
  std::vector<int32_t> blocks;        // this cache's block ids, logical order
  std::vector<uint64_t> block_hashes; // chained hashes of its full blocks (the receiver's prefix match)
};

// Where an imported sequence's blocks went: the contents of source_blocks (the
// sender's ids) must be copied into dest_blocks (ours); the first
// num_reused_blocks were already cached here and need no copy.
struct KvImport {
  std::vector<int32_t> source_blocks;
  std::vector<int32_t> dest_blocks;
  int num_reused_blocks = 0;
};

class KvCacheManager {
  struct Block;
  // The cache table's check of a candidate: the hash block b is registered under.
  struct HashOf {
    const Block* blocks;
    uint64_t operator()(int32_t b) const;
  };

 public:
  KvCacheManager(int num_blocks, int block_size, bool enable_prefix_cache);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  bool prefix_cache_enabled() const { return prefix_cache_; }
  int num_free_blocks() const { return num_free_; }  // includes cached, evictable blocks
  int num_used_blocks() const { return num_blocks() - num_free_; }
  int num_cached_blocks() const { return static_cast<int>(cached_.size()); }
  double usage() const { return static_cast<double>(num_used_blocks()) / num_blocks(); }
  int blocks_needed(int num_tokens) const { return full_blocks(num_tokens + block_size_ - 1); }
  // Whole blocks in num_tokens >= 0 tokens: a shift for the usual power-of-two
  // block sizes (an integer division per running sequence per step showed).
  int full_blocks(int num_tokens) const {
    return block_shift_ >= 0 ? num_tokens >> block_shift_ : num_tokens / block_size_;
  }

  // Longest chain of cached blocks at the start of seq's tokens (read-only).
  PrefixHit find_cached_prefix(Sequence& seq) const;
  // The same into `hit`, reusing its array (a scheduler's, every admission).
  void find_cached_prefix(Sequence& seq, PrefixHit& hit) const;

  // Blocks seq needs so it can hold num_computed_tokens + num_new_tokens tokens,
  // taking `hit` first when seq holds no block yet.
  bool can_allocate(const Sequence& seq, int num_new_tokens, const PrefixHit& hit) const;
  // Reserves them (false, and nothing changed, when they are not there).
  bool allocate(Sequence& seq, int num_new_tokens, const PrefixHit& hit);
  // Room for a sequence that already holds its blocks to compute num_new
  // tokens plus num_lookahead proposed ones (false, nothing changed, when the
  // blocks are not there). Inline: most decode steps need no new block.
  bool allocate(Sequence& seq, int num_new_tokens, int num_lookahead_tokens = 0) {
    const int target = blocks_needed(seq.num_computed_tokens + num_new_tokens + num_lookahead_tokens);
    return target <= static_cast<int>(seq.block_table.size()) || append_blocks(seq, target);
  }

  // Rolls seq back to its first num_tokens tokens: blocks past them are
  // returned (they hold no registered content), num_computed_tokens is capped.
  // Registered blocks are final, so num_tokens may not cut into them
  // (std::logic_error).
  void truncate(Sequence& seq, int num_tokens);

  // Registers seq's blocks that are now full of computed tokens in the prefix
  // cache. Call it only once the tokens are final (after proposed tokens were
  // verified and rejected ones rolled back). Inline fast path: most steps fill no block.
  void commit_full_blocks(Sequence& seq) {
    if (seq.num_computed_tokens >= (seq.num_committed_blocks + 1) * block_size_) commit_new_blocks(seq);
  }

  // Loading ahead for commit_full_blocks(seq) once seq holds computed_after
  // computed tokens, in two stages a few sequences apart: the first loads
  // where the next block's hash and id are kept, the second (which may hash
  // the block's tokens, as the commit would) its cache-table slot and record.
  // Both read seq's first two cache lines only; neither changes what the commit does.
  void prefetch_commit_data(const Sequence& seq, int computed_after) const {
    const int c = seq.num_committed_blocks;
    if (!prefix_cache_ || computed_after < (c + 1) * block_size_) return;
    __builtin_prefetch(seq.block_hash_slot(c));
    __builtin_prefetch(seq.block_table.data() + c);
  }
  void prefetch_commit_slot(Sequence& seq, int computed_after) {
    const int c = seq.num_committed_blocks;
    if (!prefix_cache_ || computed_after < (c + 1) * block_size_) return;
    if (static_cast<int>(seq.tokens().size()) < (c + 1) * block_size_) return;  // its tokens come with this step
    const std::vector<uint64_t>& hashes = seq.block_hashes(block_size_);
    cached_.prefetch(hashes[c]);
    __builtin_prefetch(&blocks_[seq.block_table[c]], 1);
  }

  // Loads what a step reads first: the free list's heads (a large fleet's
  // instance is out of the cache by its next step; engine/common/load_ahead.h).
  // Changes nothing.
  void load_state() const {
    if (!free_front_.empty()) load_lines(&free_front_.back(), sizeof(FreeEntry));
    if (back_head_ < free_back_.size()) load_lines(&free_back_[back_head_], sizeof(FreeEntry));
  }

  // Returns seq's blocks. Tail blocks are freed first, so they are evicted first.
  void free(Sequence& seq);

  // Detaches seq's blocks into an export (seq holds none afterwards); they
  // stay referenced until release_export(seq.id()).
  KvExport export_blocks(Sequence& seq);
  void release_export(int64_t seq_id);
  int num_exports() const { return static_cast<int>(exports_.size()); }
  // Gives seq (holding no block) blocks for the exported tokens, reusing the
  // leading blocks this cache already holds under the same hashes. False, and
  // nothing changed, when there is no room. The blocks are registered only by
  // a later commit_full_blocks, once their contents have arrived.
  bool import_blocks(Sequence& seq, const KvExport& from, KvImport& plan);

  // Calls f(hash) for every block the prefix cache holds, in no particular order.
  template <class F>
  void for_each_cached(F f) const {
    cached_.for_each([&](int32_t b) { f(blocks_[b].hash); });
  }
  // Forgets every cached block (blocks in use keep their contents).
  void clear_cache();

  // What stores and evictions leave behind: nothing (the default), the
  // KvEvents since the last clear_events(), or only how many blocks were
  // stored and removed (events() stays empty: for an engine whose events
  // only a counting sink hears).
  enum class Recording : uint8_t { Off, Events, Counts };
  void set_recording(Recording r) { recording_ = r; }
  Recording recording() const { return recording_; }
  void set_record_events(bool on) { recording_ = on ? Recording::Events : Recording::Off; }
  const std::vector<KvEvent>& events() const { return events_; }
  void clear_events() { events_.clear(); }
  bool counting_events() const { return recording_ == Recording::Counts; }
  bool recording_events() const { return recording_ != Recording::Off; }
  int64_t num_stored_counted() const { return num_stored_; }
  int64_t num_removed_counted() const { return num_removed_; }
  void clear_counts() { num_stored_ = num_removed_ = 0; }

  // Introspection for tests and routers.
  int ref_count(int block) const { return blocks_[block].ref_count; }
  // For tests: the generation block's next free continues from (at most
  // kMaxFreeGeneration, after which it wraps to 0).
  static constexpr uint32_t kMaxFreeGeneration = (uint32_t{1} << 28) - 1;
  void set_free_generation(int block, uint32_t gen) { blocks_[block].free_gen = gen & kMaxFreeGeneration; }
  bool is_cached(uint64_t hash) const { return cached_block(hash) >= 0; }
  // The block registered under `hash`, or -1.
  int cached_block(uint64_t hash) const { return cached_.find(hash, hash_of()); }
  // Empty when every invariant holds, else what is broken. `live` are the
  // sequences holding blocks (exports are counted here).
  std::string check_invariants(const std::vector<const Sequence*>& live) const;

 private:
  // 16 bytes: a fleet simulation walks millions of these. The hash is here,
  // not in the free list's entries: eviction reads the record anyway, and
  // the cache's table keeps only 32 bits of it (BlockHashTable).
  struct Block {
    Block() : free_gen(0), has_hash(0), in_free_list(0), in_back(0), first_block(0) {}
    uint64_t hash = 0;  // the hash it is registered under (while has_hash)
    int32_t ref_count = 0;
    uint32_t free_gen : 28;     // bumped each time the block joins the free list (FreeEntry::gen), modulo 2^28
    uint32_t has_hash : 1;
    uint32_t in_free_list : 1;
    uint32_t in_back : 1;      // on the free list's back part (free_back_), not its front
    uint32_t first_block : 1;  // registered as its chain's first block (KvEvent::first_block)
  };
  static_assert(sizeof(Block) == 16, "a block's record is 16 bytes");
  HashOf hash_of() const { return HashOf{blocks_.data()}; }

  // The free list, least recently used first, is two arrays: the front part
  // (blocks holding nothing reusable, taken first, last freed first) and the
  // back part (cached blocks in the order they were freed, then the blocks
  // never used). It is the order a doubly linked list through the blocks
  // would give (vLLM's FreeKVCacheBlockQueue), but taking n blocks reads
  // consecutive entries instead of chasing n links through cold block
  // records, so their hashes and table slots can be loaded ahead. A block
  // leaving the middle (a prefix hit) leaves its entry behind, dead: an
  // entry is live while its block is free and was freed with that
  // generation; dead entries are skipped, and dropped when a quarter of an
  // array is dead or taken.
  struct FreeEntry {
    int32_t block;
    uint32_t gen;  // the block's free_gen when it joined
  };
  bool is_live(const FreeEntry& e) const { return blocks_[e.block].in_free_list && blocks_[e.block].free_gen == e.gen; }

  void commit_new_blocks(Sequence& seq);
  bool append_blocks(Sequence& seq, int target);
  // Drops a reference to each block of `table`.
  void release_blocks(const std::vector<int32_t>& table);
  // Takes the free list's head, with one reference.
  int take_free_block();
  // Takes the free block b (its entry already off the list), with one reference.
  void claim(int b);
  // Takes n blocks off the free list (n <= num_free_) onto the end of table, each with one reference.
  void take_free_blocks(std::vector<int32_t>& table, int n);
  void touch(int block);
  void evict(int block);
  // Inline: it runs for every block a finished sequence returns; the rare
  // full array goes to make_room_back.
  void push_free_back(int block) {
    if (free_back_.size() == free_back_.capacity()) make_room_back();
    const uint32_t gen = next_generation(block);
    Block& b = blocks_[block];
    b.in_free_list = true;
    b.in_back = true;
    free_back_.push_back({block, gen});
    ++num_free_;
  }
  // The generation of block's next free-list entry. Every 2^28 frees it
  // wraps to 0: the dead entries are dropped first, so none left from an
  // earlier lap can match it (call it before the block joins the list).
  uint32_t next_generation(int block) {
    Block& b = blocks_[block];
    b.free_gen = b.free_gen + 1;
    if (__builtin_expect(b.free_gen == 0, 0)) drop_dead_entries();
    return b.free_gen;
  }
  void drop_dead_entries();
  void make_room_back();
  void push_free_front(int block);
  void unlink_free(int block);
  // Drops the dead entries (and the taken ones before `head`) of a part, keeping the order.
  void compact(std::vector<FreeEntry>& part, size_t head);
  // Written in place: a KvEvent built on the stack and copied in stalls on
  // its own partly written bytes (two events per block of a prompt).
  void publish(KvEvent::Kind kind, uint64_t hash, uint64_t parent_hash, int32_t num_tokens, bool first_block) {
    if (recording_ == Recording::Off) return;
    if (recording_ == Recording::Counts) {  // an AllCleared event is not counted
      num_stored_ += kind == KvEvent::Kind::BlockStored;
      num_removed_ += kind == KvEvent::Kind::BlockRemoved;
      return;
    }
    KvEvent& ev = events_.emplace_back();
    ev.kind = kind;
    ev.block_hash = hash;
    ev.parent_hash = parent_hash;
    ev.num_tokens = num_tokens;
    ev.first_block = first_block;
  }

  int block_size_;
  int block_shift_ = -1;  // log2(block_size_) when it is a power of two
  bool prefix_cache_;
  std::vector<Block> blocks_;
  std::vector<FreeEntry> free_front_;  // top (back()) is the list's head
  std::vector<FreeEntry> free_back_;   // [back_head_, end) in list order
  size_t back_head_ = 0;
  int num_free_ = 0;
  int num_back_dead_ = 0, num_front_dead_ = 0;  // dead entries in each part
  BlockHashTable cached_;  // block hash -> block id
  struct Held {
    std::vector<int32_t> blocks;
    std::vector<uint64_t> hashes;  // of its full blocks
  };
  std::unordered_map<int64_t, Held> exports_;  // seq id -> blocks held for a transfer
  Recording recording_ = Recording::Off;
  std::vector<KvEvent> events_;
  int64_t num_stored_ = 0, num_removed_ = 0;
};

inline uint64_t KvCacheManager::HashOf::operator()(int32_t b) const { return blocks[b].hash; }

}  // namespace testbed
