#include "engine/kv_cache_manager.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "engine/block_hash.h"
#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void CacheConfig::bind(OptionTable& t) {
  t.add("cache.block_size", &block_size, "tokens per KV block");
  t.add("cache.prefix_cache", &prefix_cache, "reuse cached blocks by chained hash");
  t.add("cache.num_blocks", &num_blocks, "KV blocks (0: from device memory, simulated GPUs only)");
  t.add("cache.gpu_memory_fraction", &gpu_memory_fraction, "share of device memory for weights and KV");
}

void CacheConfig::validate() const {
  require(block_size > 0 && block_size <= 1024, "cache.block_size", "must be in [1, 1024]");
  require(num_blocks >= 0, "cache.num_blocks", "must be >= 0 (0 derives it from memory)");
  require(gpu_memory_fraction > 0 && gpu_memory_fraction <= 1, "cache.gpu_memory_fraction",
          "must be in (0, 1]");
}

int PrefixHit::num_tokens() const { return static_cast<int>(blocks.size()) * block_size; }

KvCacheManager::KvCacheManager(int num_blocks, int block_size, bool enable_prefix_cache)
    : block_size_(block_size), prefix_cache_(enable_prefix_cache), blocks_(num_blocks),
      cached_(enable_prefix_cache ? static_cast<size_t>(std::max(num_blocks, 1)) : 1) {
  require(num_blocks > 0, "cache.num_blocks", "the KV cache needs at least one block");
  require(block_size > 0, "cache.block_size", "must be positive");
  if ((block_size & (block_size - 1)) == 0) block_shift_ = __builtin_ctz(static_cast<unsigned>(block_size));
  free_back_.reserve(num_blocks);
  for (int b = 0; b < num_blocks; ++b) push_free_back(b);
}

PrefixHit KvCacheManager::find_cached_prefix(Sequence& seq) const {
  PrefixHit hit;
  find_cached_prefix(seq, hit);
  return hit;
}

void KvCacheManager::find_cached_prefix(Sequence& seq, PrefixHit& hit) const {
  hit.blocks.clear();
  hit.block_size = block_size_;
  if (!prefix_cache_ || cached_.empty()) return;
  // At least one token is computed, so the last step has logits to sample from.
  const int max_blocks = full_blocks(seq.num_tokens() - 1);
  if (max_blocks <= 0) return;
  const std::vector<uint64_t>& hashes = seq.block_hashes(block_size_);
  constexpr int kAhead = 8;
  for (int b = 0; b < std::min(kAhead, max_blocks); ++b) cached_.prefetch(hashes[b]);
  for (int b = 0; b < max_blocks; ++b) {
    if (b + kAhead < max_blocks) cached_.prefetch(hashes[b + kAhead]);
    const int32_t block = cached_.find(hashes[b], hash_of());
    if (block < 0) break;
    hit.blocks.push_back(block);
  }
}

bool KvCacheManager::can_allocate(const Sequence& seq, int num_new_tokens, const PrefixHit& hit) const {
  const bool take_hit = seq.block_table.empty() && !hit.blocks.empty();
  const int base = take_hit ? hit.num_tokens() : seq.num_computed_tokens;
  const int held = take_hit ? static_cast<int>(hit.blocks.size()) : static_cast<int>(seq.block_table.size());
  int need = blocks_needed(base + num_new_tokens) - held;
  if (need < 0) need = 0;
  if (take_hit) {
    for (int32_t b : hit.blocks)
      if (blocks_[b].ref_count == 0) ++need;  // a cached free block leaves the free list
  }
  return need <= num_free_;
}

bool KvCacheManager::append_blocks(Sequence& seq, int target) {
  const int have = static_cast<int>(seq.block_table.size());
  if (target - have > num_free_) return false;
  if (target > have) take_free_blocks(seq.block_table, target - have);
  return true;
}

bool KvCacheManager::allocate(Sequence& seq, int num_new_tokens, const PrefixHit& hit) {
  if (!can_allocate(seq, num_new_tokens, hit)) return false;
  if (seq.block_table.empty()) seq.block_table.reserve(blocks_needed(seq.num_prompt_tokens() + seq.max_output_tokens()));
  if (seq.block_table.empty() && !hit.blocks.empty()) {
    for (int32_t b : hit.blocks) {
      touch(b);
      seq.block_table.push_back(b);
    }
    seq.num_computed_tokens = hit.num_tokens();
    seq.num_committed_blocks = static_cast<int>(hit.blocks.size());
  }
  const int target = blocks_needed(seq.num_computed_tokens + num_new_tokens);
  const int have = static_cast<int>(seq.block_table.size());
  if (target > have) take_free_blocks(seq.block_table, target - have);
  return true;
}

void KvCacheManager::commit_new_blocks(Sequence& seq) {
  const int num_full = full_blocks(seq.num_computed_tokens);
  if (!prefix_cache_) {
    seq.num_committed_blocks = num_full;
    return;
  }
  if (seq.num_committed_blocks >= num_full) return;
  // Through raw pointers: the stores below (block records, events) would
  // otherwise reload the vectors' data at every block.
  const uint64_t* hashes = seq.block_hashes(block_size_).data();
  const int32_t* table = seq.block_table.data();
  Block* blocks = blocks_.data();
  const int from = seq.num_committed_blocks;
  // A prefill commits tens of blocks at once: load their table slots and
  // block records a few ahead (each is a cache miss in a large fleet).
  constexpr int kAhead = 8;
  for (int i = from; i < std::min(num_full, from + kAhead); ++i) cached_.prefetch(hashes[i]);
  for (int i = from; i < num_full; ++i) {
    if (i + kAhead < num_full) {
      cached_.prefetch(hashes[i + kAhead]);
      __builtin_prefetch(&blocks[table[i + kAhead]], 1);
    }
    const uint64_t h = hashes[i];
    // Another sequence may have computed the same block meanwhile: keep the
    // first copy registered; ours stays anonymous and is reused first.
    if (!cached_.insert_new(h, table[i], hash_of())) continue;
    Block& block = blocks[table[i]];
    block.hash = h;
    block.has_hash = true;
    block.first_block = i == 0;
    publish(KvEvent::Kind::BlockStored, h, i == 0 ? root_block_hash(seq.request().cache_salt) : hashes[i - 1],
            block_size_, i == 0);
  }
  seq.num_committed_blocks = num_full;
}

void KvCacheManager::release_blocks(const std::vector<int32_t>& table) {
  const int n = static_cast<int>(table.size());
  for (int i = n - 1; i >= std::max(0, n - 8); --i) __builtin_prefetch(&blocks_[table[i]]);
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const auto ahead = it + 8;
    if (ahead < table.rend()) __builtin_prefetch(&blocks_[*ahead]);
    Block& block = blocks_[*it];
    if (--block.ref_count == 0) {
      if (block.has_hash)
        push_free_back(*it);
      else
        push_free_front(*it);
    }
  }
}

void KvCacheManager::free(Sequence& seq) {
  release_blocks(seq.block_table);
  seq.block_table.clear();
  seq.num_committed_blocks = 0;
}

void KvCacheManager::truncate(Sequence& seq, int num_tokens) {
  if (num_tokens < seq.num_committed_blocks * block_size_)
    throw std::logic_error("KvCacheManager::truncate: sequence " + std::to_string(seq.id()) + " to " +
                           std::to_string(num_tokens) + " tokens would cut into its registered blocks");
  const int keep = blocks_needed(num_tokens);
  while (static_cast<int>(seq.block_table.size()) > keep) {
    const int b = seq.block_table.back();
    seq.block_table.pop_back();
    // Past the registered blocks: nothing reusable, so it is taken first.
    if (--blocks_[b].ref_count == 0) push_free_front(b);
  }
  seq.num_computed_tokens = std::min(seq.num_computed_tokens, num_tokens);
}

KvExport KvCacheManager::export_blocks(Sequence& seq) {
  if (exports_.count(seq.id()))
    throw std::logic_error("KvCacheManager::export_blocks: sequence " + std::to_string(seq.id()) +
                           " is exported already");
  KvExport out;
  out.seq_id = seq.id();
  out.num_tokens = seq.num_computed_tokens;
  out.block_size = block_size_;
  out.blocks = seq.block_table;
  const int num_full = std::min(full_blocks(seq.num_computed_tokens), static_cast<int>(seq.block_table.size()));
  const std::vector<uint64_t>& hashes = seq.block_hashes(block_size_);
  out.block_hashes.assign(hashes.begin(), hashes.begin() + num_full);
  exports_[seq.id()] = Held{std::move(seq.block_table), out.block_hashes};
  seq.block_table.clear();
  seq.num_committed_blocks = 0;
  return out;
}

void KvCacheManager::release_export(int64_t seq_id) {
  auto it = exports_.find(seq_id);
  if (it == exports_.end())
    throw std::logic_error("KvCacheManager::release_export: sequence " + std::to_string(seq_id) + " is not exported");
  release_blocks(it->second.blocks);
  exports_.erase(it);
}

bool KvCacheManager::import_blocks(Sequence& seq, const KvExport& from, KvImport& plan) {
  if (!seq.block_table.empty())
    throw std::logic_error("KvCacheManager::import_blocks: sequence " + std::to_string(seq.id()) + " holds blocks");
  if (from.block_size != block_size_)
    throw std::logic_error("KvCacheManager::import_blocks: block size " + std::to_string(from.block_size) +
                           " into a cache of " + std::to_string(block_size_));
  const int total = blocks_needed(from.num_tokens);
  if (static_cast<int>(from.blocks.size()) < total)
    throw std::logic_error("KvCacheManager::import_blocks: the export holds fewer blocks than its tokens need");
  // Leading blocks this cache holds already (another sequence computed the same prefix here).
  // One walk of the hash table: the hits go straight into the block table
  // (which stays empty again when there is no room).
  int reused = 0, revived = 0;
  seq.block_table.reserve(blocks_needed(seq.num_prompt_tokens() + seq.max_output_tokens()));
  if (prefix_cache_)
    for (; reused < static_cast<int>(from.block_hashes.size()) && reused < total; ++reused) {
      const int32_t b = cached_.find(from.block_hashes[reused], hash_of());
      if (b < 0) break;
      if (blocks_[b].ref_count == 0) ++revived;
      seq.block_table.push_back(b);
    }
  if (total - reused + revived > num_free_) {
    seq.block_table.clear();
    return false;
  }
  plan.source_blocks.clear();
  plan.dest_blocks.clear();
  plan.num_reused_blocks = reused;
  for (int i = 0; i < reused; ++i) touch(seq.block_table[i]);
  for (int i = reused; i < total; ++i) {
    const int b = take_free_block();
    seq.block_table.push_back(b);
    plan.source_blocks.push_back(from.blocks[i]);
    plan.dest_blocks.push_back(b);
  }
  seq.num_computed_tokens = from.num_tokens;
  seq.num_committed_blocks = reused;
  return true;
}

void KvCacheManager::clear_cache() {
  cached_.for_each([&](int32_t id) { blocks_[id].has_hash = false; });
  cached_.clear();
  publish(KvEvent::Kind::AllCleared, 0, 0, 0, false);
}

void KvCacheManager::take_free_blocks(std::vector<int32_t>& table, int n) {
  // The free list's head holds the least recently used blocks, whose records
  // and cache-table slots are cold: evicting one after another waits for
  // two misses each. The entries are read in order, so both can be loaded
  // ahead: the record kFar entries ahead, the table slot kNear ahead (its
  // hash read from the record loaded by then). Dead entries only shift what
  // is loaded. The front part's blocks hold no hash: only their records.
  // The front part (blocks that hold nothing reusable) is taken first, whole,
  // then the back part from its head: one loop each, the back's entries read
  // through a pointer and the blocks written to the table's new end (an
  // entry looked up across both parts for every block, and a push_back,
  // cost this function 280M instructions on the Azure trace; now 211M,
  // cachegrind).
  if (n > num_free_)
    throw std::logic_error("KvCacheManager: " + std::to_string(n) + " blocks taken with " + std::to_string(num_free_) +
                           " free");
  constexpr size_t kFar = 16, kNear = 8;
  const size_t first = table.size();
  table.resize(first + static_cast<size_t>(n));
  int32_t* out = table.data() + first;
  int taken = 0;
  const bool ahead = prefix_cache_ && n > 1;
  const size_t size = free_back_.size();
  FreeEntry* const back = free_back_.data();
  size_t head = back_head_;
  if (ahead) {
    // The front's first entries, and the back part's first kFar (reached
    // once the front is taken; the loop below loads kFar past its head).
    const size_t in_front = std::min<size_t>(free_front_.size(), std::min<size_t>(kFar, n));
    for (size_t k = 0; k < in_front; ++k) __builtin_prefetch(&blocks_[free_front_[free_front_.size() - 1 - k].block], 1);
    for (size_t k = head; k < std::min(size, head + kFar); ++k) __builtin_prefetch(&blocks_[back[k].block], 1);
    for (size_t k = head; k < std::min(size, head + kNear); ++k) cached_.prefetch(blocks_[back[k].block].hash);
  }
  while (taken < n && !free_front_.empty()) {
    const FreeEntry e = free_front_.back();
    free_front_.pop_back();
    if (!is_live(e)) {
      --num_front_dead_;
      continue;
    }
    out[taken++] = e.block;
    claim(e.block);
  }
  // The live entries left, num_free_ of them, all lie in [head, size) now.
  while (taken < n) {
    if (ahead) {
      if (head + kFar < size) __builtin_prefetch(&blocks_[back[head + kFar].block], 1);
      // A stale hash (the block since taken, or never registered) only loads a slot for nothing.
      if (head + kNear < size) cached_.prefetch(blocks_[back[head + kNear].block].hash);
    }
    const FreeEntry e = back[head++];
    if (!is_live(e)) {
      --num_back_dead_;
      continue;
    }
    out[taken++] = e.block;
    claim(e.block);
  }
  if (head == size) {
    free_back_.clear();
    head = 0;
  }
  back_head_ = head;
  // The next take (often one block, for a decode step a few sequences on)
  // finds the new head's record and table slot loaded.
  if (prefix_cache_) {
    const FreeEntry* e = !free_front_.empty() ? &free_front_.back()
                                              : (back_head_ < free_back_.size() ? &free_back_[back_head_] : nullptr);
    if (e) {
      const Block& block = blocks_[e->block];
      if (block.has_hash) cached_.prefetch(block.hash);
    }
  }
}

__attribute__((always_inline)) inline void KvCacheManager::evict(int b) {
  Block& block = blocks_[b];
  cached_.erase(block.hash, b);
  block.has_hash = false;
  publish(KvEvent::Kind::BlockRemoved, block.hash, 0, 0, block.first_block);
}

__attribute__((always_inline)) inline void KvCacheManager::claim(int b) {
  Block& block = blocks_[b];
  block.in_free_list = false;
  --num_free_;
  if (block.has_hash) evict(b);
  block.ref_count = 1;
}

__attribute__((always_inline)) inline int KvCacheManager::take_free_block() {
  int b = -1;
  while (!free_front_.empty()) {
    const FreeEntry e = free_front_.back();
    free_front_.pop_back();
    if (is_live(e)) {
      b = e.block;
      break;
    }
    --num_front_dead_;
  }
  while (b < 0) {  // num_free_ > 0, so a live entry is left
    const FreeEntry e = free_back_[back_head_++];
    if (is_live(e)) {
      b = e.block;
    } else {
      --num_back_dead_;
    }
  }
  if (back_head_ == free_back_.size()) {
    free_back_.clear();
    back_head_ = 0;
  }
  claim(b);
  return b;
}

void KvCacheManager::touch(int b) {
  if (blocks_[b].ref_count == 0) unlink_free(b);
  ++blocks_[b].ref_count;
}

void KvCacheManager::compact(std::vector<FreeEntry>& part, size_t head) {
  size_t out = 0;
  for (size_t i = head; i < part.size(); ++i)
    if (is_live(part[i])) part[out++] = part[i];
  part.resize(out);
}

void KvCacheManager::make_room_back() {
  // When the array is full, drop what is dead or taken if that is a quarter
  // of it or more (each drop then pays for itself), else grow by a quarter:
  // at most 4/3 of the live entries fill it, so it holds at most 5/3 of the
  // block count (a fleet keeps one per instance). Dropping at half moved a
  // third as many entries on the Azure trace (22M fewer instructions of its
  // 3.5G) but let the array hold 5/2 of the block count: fleet_1k.ini peaked
  // 0.36 GB higher (README, Fleet scale).
  if ((back_head_ + num_back_dead_) * 4 >= free_back_.size()) {
    if (num_back_dead_ == 0)  // only taken entries before the head: no record to read
      free_back_.erase(free_back_.begin(), free_back_.begin() + static_cast<std::ptrdiff_t>(back_head_));
    else
      compact(free_back_, back_head_);
    back_head_ = 0;
    num_back_dead_ = 0;
  } else {
    free_back_.reserve(free_back_.size() + free_back_.size() / 4 + 16);
  }
}

void KvCacheManager::push_free_front(int b) {
  if (free_front_.size() == free_front_.capacity()) {
    if (static_cast<size_t>(num_front_dead_) * 4 >= free_front_.size()) {
      compact(free_front_, 0);
      num_front_dead_ = 0;
    } else {
      free_front_.reserve(free_front_.size() + free_front_.size() / 4 + 16);
    }
  }
  const uint32_t gen = next_generation(b);
  Block& block = blocks_[b];
  block.in_free_list = true;
  block.in_back = false;
  free_front_.push_back({b, gen});
  ++num_free_;
}

void KvCacheManager::drop_dead_entries() {
  compact(free_front_, 0);
  num_front_dead_ = 0;
  compact(free_back_, back_head_);
  back_head_ = 0;
  num_back_dead_ = 0;
}

void KvCacheManager::unlink_free(int b) {
  // Its entry stays where it is, dead from now on.
  Block& block = blocks_[b];
  block.in_free_list = false;
  --num_free_;
  ++(block.in_back ? num_back_dead_ : num_front_dead_);
}

std::string KvCacheManager::check_invariants(const std::vector<const Sequence*>& live) const {
  std::ostringstream err;
  std::vector<int> expected(blocks_.size(), 0);
  // A cached block is indexed under its hash, the one its holders give it.
  auto check_hash = [&](int32_t b, uint64_t hash, const char* who, int64_t id) {
    if (!blocks_[b].has_hash) return;
    if (blocks_[b].hash != hash)
      err << "cached block " << b << " (" << who << " " << id << ") is registered under another hash; ";
    if (cached_.find(blocks_[b].hash, hash_of()) != b)
      err << "cached block " << b << " (" << who << " " << id << ") is not indexed under its hash; ";
  };
  auto check_held = [&](const std::vector<int32_t>& table, const std::vector<uint64_t>& hashes, const char* who,
                        int64_t id) {
    for (size_t i = 0; i < table.size(); ++i) {
      const int32_t b = table[i];
      if (b < 0 || b >= num_blocks()) {
        err << who << " " << id << " holds invalid block " << b << "; ";
        continue;
      }
      ++expected[b];
      if (blocks_[b].has_hash && i >= hashes.size())
        err << who << " " << id << " holds cached block " << b << " past its block hashes; ";
      else if (blocks_[b].has_hash)
        check_hash(b, hashes[i], who, id);
    }
  };
  for (const auto& [id, held] : exports_) check_held(held.blocks, held.hashes, "export", id);
  for (const Sequence* s : live) check_held(s->block_table, s->known_block_hashes(), "sequence", s->id());
  // The free list in order: the front part from its top, then the back part.
  std::vector<char> listed_at(blocks_.size(), 0);
  int listed = 0, front_dead = 0, back_dead = 0;
  auto visit = [&](const FreeEntry& e, bool back) {
    if (e.block < 0 || e.block >= num_blocks()) {
      err << "free list entry names invalid block " << e.block << "; ";
      return;
    }
    if (!is_live(e)) {
      ++(back ? back_dead : front_dead);
      return;
    }
    if (blocks_[e.block].in_back != back) err << "block " << e.block << " listed in the wrong part; ";
    if (listed_at[e.block]++) err << "block " << e.block << " listed twice; ";
    ++listed;
    check_hash(e.block, blocks_[e.block].hash, "free entry of block", e.block);
  };
  for (size_t i = free_front_.size(); i > 0;) visit(free_front_[--i], false);
  for (size_t i = back_head_; i < free_back_.size(); ++i) visit(free_back_[i], true);
  if (listed != num_free_) err << "free list holds " << listed << " but num_free is " << num_free_ << "; ";
  if (front_dead != num_front_dead_ || back_dead != num_back_dead_)
    err << "free list holds " << front_dead << " and " << back_dead << " dead entries but counted "
        << num_front_dead_ << " and " << num_back_dead_ << "; ";
  for (int b = 0; b < num_blocks(); ++b)
    if (blocks_[b].in_free_list && !listed_at[b]) err << "block " << b << " flagged free but not listed; ";
  int hashed = 0;
  for (int b = 0; b < num_blocks(); ++b) {
    const Block& block = blocks_[b];
    if (block.ref_count < 0) err << "block " << b << " refcount " << block.ref_count << "; ";
    if (block.ref_count != expected[b])
      err << "block " << b << " refcount " << block.ref_count << " but held " << expected[b] << " times; ";
    if ((block.ref_count == 0) != block.in_free_list)
      err << "block " << b << " refcount " << block.ref_count << " vs free flag " << block.in_free_list << "; ";
    if (block.has_hash) ++hashed;
  }
  if (hashed != static_cast<int>(cached_.size()))
    err << cached_.size() << " cache entries but " << hashed << " hashed blocks; ";
  cached_.for_each([&](int32_t b) {
    if (b < 0 || b >= num_blocks() || !blocks_[b].has_hash) err << "the cache indexes block " << b << ", not cached; ";
  });
  return err.str();
}

}  // namespace testbed
