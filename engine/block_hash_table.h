// BlockHashTable: the prefix cache's index, block hash -> block id, in 8-byte
// slots (linear probing, backward-shift deletion).
//
// A slot holds the block id and the hash's low 32 bits; the full hash lives in
// the block's record, where a lookup that matches those 32 bits checks it
// (`hash_of`, the caller's records: a hit reads the record next anyway). Half
// the bytes of a 16-byte slot buy twice the slots in the same memory: a cache
// holds at most one hash per block, so with at least three slots a block the
// table is never more than a third full and never grows. At that load most
// inserts and erases touch one slot. FlatHashMap64, up to 70% full, spent
// about 30 ns an insert-erase pair (a microbenchmark at 38% full) in probe
// and shift loops whose exits cachegrind's branch simulation counted 4.6M
// mispredicts of the Azure trace's 12.4M; a 4,000-block cache ran the trace
// 11% faster with its table twice as large (README, Fleet scale).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace testbed {

class BlockHashTable {
 public:
  // The most entries: a slot's home is its tag's bits, so at most 2^32 slots.
  static constexpr size_t kMaxEntries = (size_t{1} << 32) / 3;
  // Room for `max_entries` entries (the cache's block count), fixed.
  explicit BlockHashTable(size_t max_entries) : max_entries_(max_entries) {
    if (max_entries > kMaxEntries)
      throw std::length_error("BlockHashTable: " + std::to_string(max_entries) + " entries, more than " +
                              std::to_string(kMaxEntries));
    size_t c = 16;
    while (c < 3 * max_entries) c *= 2;
    slots_.assign(c, kEmpty);
    mask_ = c - 1;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return slots_.size(); }

  // The block registered under `hash`, or -1. hash_of(block): the hash the
  // block is registered under.
  template <class HashOf>
  int32_t find(uint64_t hash, HashOf hash_of) const {
    bool found;
    const size_t i = probe(hash, hash_of, found);
    return found ? block_of(slots_[i]) : -1;
  }
  // Registers `block` under `hash` when no block is (true); else leaves the table as it is (false).
  template <class HashOf>
  bool insert_new(uint64_t hash, int32_t block, HashOf hash_of) {
    bool found;
    const size_t i = probe(hash, hash_of, found);
    if (found) return false;
    if (size_ >= max_entries_)
      throw std::logic_error("BlockHashTable: more than " + std::to_string(max_entries_) + " entries");
    slots_[i] = slot_of(hash, block);
    ++size_;
    return true;
  }
  // Removes `block`, registered under `hash` (false when it is not).
  bool erase(uint64_t hash, int32_t block) {
    const uint64_t want = slot_of(hash, block);
    size_t i = hash & mask_;
    for (;; i = (i + 1) & mask_) {
      if (slots_[i] == want) break;
      if (slots_[i] == kEmpty) return false;
    }
    // Backward shift: pull later members of the probe run into the hole, so
    // lookups never need tombstones. A slot's home is its low bits.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      const uint64_t s = slots_[j];
      if (s == kEmpty) break;
      const size_t home = s & mask_;
      // Move j into i when its home is not within (i, j] cyclically.
      if (((j - home) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = s;
        i = j;
      }
    }
    slots_[i] = kEmpty;
    --size_;
    return true;
  }
  // Starts loading the slot `hash` lives in (or would go to).
  void prefetch(uint64_t hash) const { __builtin_prefetch(&slots_[hash & mask_]); }

  void clear() {
    slots_.assign(slots_.size(), kEmpty);
    size_ = 0;
  }
  // f(block) for every entry, in table order.
  template <class F>
  void for_each(F f) const {
    for (uint64_t s : slots_)
      if (s != kEmpty) f(block_of(s));
  }

 private:
  // The slot of the block registered under `hash` (found), else the empty
  // slot that ends its probe run.
  template <class HashOf>
  size_t probe(uint64_t hash, HashOf hash_of, bool& found) const {
    const uint32_t tag = static_cast<uint32_t>(hash);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      found = s != kEmpty;
      if (!found || (static_cast<uint32_t>(s) == tag && hash_of(block_of(s)) == hash)) return i;
    }
  }
  // Block ids are below 2^31, so no slot of a registered block is all ones.
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t slot_of(uint64_t hash, int32_t block) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(block)) << 32) | static_cast<uint32_t>(hash);
  }
  static int32_t block_of(uint64_t slot) { return static_cast<int32_t>(slot >> 32); }

  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t max_entries_;
};

}  // namespace testbed
