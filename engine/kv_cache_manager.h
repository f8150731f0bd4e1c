// KvCacheManager: the paged KV cache's bookkeeping (no tensors here; executors
// own the memory, laid out as kv_layout.h says).
//
// Fixed-size blocks with reference counts; a block table per sequence. With the
// prefix cache on, every full computed block is registered under its chained
// hash; a new sequence takes the longest chain of registered blocks instead of
// recomputing it (always leaving at least one prompt token to compute, so the
// step that finishes the prompt has logits to sample from). Blocks of finished
// sequences keep their hash on an LRU free list and are evicted lazily, only
// when an allocation needs a block. Blocks that hold nothing reusable go to the
// front of the free list so they are taken before any cached block.
//
// Verbs, as in nano-vllm: find_cached_prefix, can_allocate / allocate,
// commit_full_blocks (after a step computed them), free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/flat_hash_map.h"
#include "engine/kv_event.h"
#include "engine/sequence.h"

namespace testbed {

struct CacheConfig {
  int block_size = 16;
  bool prefix_cache = true;
  int num_blocks = 0;                 // 0: derive from gpu_memory_fraction (simulated GPUs)
  double gpu_memory_fraction = 0.9;   // share of device memory for weights + KV
  void validate() const;
};

struct PrefixHit {
  std::vector<int32_t> blocks;  // physical ids of the cached leading blocks
  int num_tokens() const;
  int block_size = 0;
};

class KvCacheManager {
 public:
  KvCacheManager(int num_blocks, int block_size, bool enable_prefix_cache);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  bool prefix_cache_enabled() const { return prefix_cache_; }
  int num_free_blocks() const { return num_free_; }  // includes cached, evictable blocks
  int num_used_blocks() const { return num_blocks() - num_free_; }
  int num_cached_blocks() const { return static_cast<int>(cached_.size()); }
  double usage() const { return static_cast<double>(num_used_blocks()) / num_blocks(); }

  // Longest chain of cached blocks at the start of seq's tokens (read-only).
  PrefixHit find_cached_prefix(Sequence& seq) const;

  // Blocks seq needs so it can hold num_computed_tokens + num_new_tokens tokens,
  // taking `hit` first when seq holds no block yet.
  bool can_allocate(const Sequence& seq, int num_new_tokens, const PrefixHit& hit) const;
  // Reserves them (false, and nothing changed, when they are not there).
  bool allocate(Sequence& seq, int num_new_tokens, const PrefixHit& hit);
  // The same for a sequence that already holds its blocks (the per-step path;
  // inline because most decode steps need no new block).
  bool allocate(Sequence& seq, int num_new_tokens) {
    const int target = blocks_needed(seq.num_computed_tokens + num_new_tokens);
    return target <= static_cast<int>(seq.block_table.size()) || append_blocks(seq, target);
  }

  // Registers seq's blocks that are now full and computed in the prefix cache.
  // Inline fast path: most steps fill no block.
  void commit_full_blocks(Sequence& seq) {
    if (seq.num_computed_tokens >= (seq.num_committed_blocks + 1) * block_size_) commit_new_blocks(seq);
  }

  // Returns seq's blocks. Tail blocks are freed first, so they are evicted first.
  void free(Sequence& seq);

  // Forgets every cached block (blocks in use keep their contents).
  void clear_cache();

  void add_listener(KvEventListener* listener) { listeners_.push_back(listener); }

  // Introspection for tests and routers.
  int ref_count(int block) const { return blocks_[block].ref_count; }
  bool is_cached(uint64_t hash) const { return cached_.contains(hash); }
  // Empty when every invariant holds, else what is broken. `live` are the sequences holding blocks.
  std::string check_invariants(const std::vector<const Sequence*>& live) const;

 private:
  // 16 bytes: a fleet simulation walks millions of these; the hash lives apart
  // (block_hash_) because only storing and evicting need it.
  struct Block {
    int32_t ref_count = 0;
    int32_t prev = -1, next = -1;  // free list links
    bool has_hash = false;
    bool in_free_list = false;
  };

  void commit_new_blocks(Sequence& seq);
  bool append_blocks(Sequence& seq, int target);
  int blocks_needed(int num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }
  int take_free_block();
  void touch(int block);
  void evict(int block);
  void push_free_back(int block);
  void push_free_front(int block);
  void unlink_free(int block);
  void publish(const KvEvent& event);

  int block_size_;
  bool prefix_cache_;
  std::vector<Block> blocks_;
  std::vector<uint64_t> block_hash_;
  int free_head_ = -1, free_tail_ = -1, num_free_ = 0;
  FlatHashMap64<int32_t> cached_;  // block hash -> block id
  std::vector<KvEventListener*> listeners_;
};

}  // namespace testbed
