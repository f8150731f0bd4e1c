// FlatHashMap64: an open-addressing hash map from 64-bit block hashes to small
// values (linear probing, backward-shift deletion). The prefix cache and the
// routers' indexes insert and erase a key per block stored or evicted; a
// node-based std::unordered_map pays an allocation and a cache miss for each.
// Keys are block hashes, already well mixed, so their low bits index the table.
// Key 0 marks an empty slot (block hashes are never 0: see block_hash.cpp), so a
// probe touches one cache line, not a slot and an occupancy byte.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/common/heap_advice.h"

namespace testbed {

template <class V>
class FlatHashMap64 {
 public:
  static constexpr uint64_t kEmpty = 0;  // never a key
  explicit FlatHashMap64(size_t expected = 16) { rehash(capacity_for(expected)); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return slots_.size(); }  // slots (a power of two; grows past 70% full)

  V* find(uint64_t key) {
    for (size_t i = key & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  const V* find(uint64_t key) const { return const_cast<FlatHashMap64*>(this)->find(key); }
  // Starts loading the slot `key` lives in. A prefix lookup knows all its keys
  // up front; prefetching a few ahead overlaps what would be one cache miss
  // after another in a table larger than the cache.
  void prefetch(uint64_t key) const { __builtin_prefetch(&slots_[key & mask_]); }
  bool contains(uint64_t key) const { return find(key) != nullptr; }

  // The value of `key`, inserted default-constructed when absent.
  V& operator[](uint64_t key) {
    if (V* v = find(key)) return *v;
    if (size_ >= max_size_) rehash(slots_.size() * 2);
    size_t i = key & mask_;
    while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
    slots_[i].key = key;
    slots_[i].value = V();
    ++size_;
    return slots_[i].value;
  }

  // Inserts key -> value when key is absent (true); leaves the map as it is
  // when present (false). One probe, where contains() then operator[] take two.
  bool insert_new(uint64_t key, const V& value) {
    size_t i = key & mask_;
    for (; slots_[i].key != kEmpty; i = (i + 1) & mask_)
      if (slots_[i].key == key) return false;
    if (size_ >= max_size_) {  // grows exactly when operator[] would
      rehash(slots_.size() * 2);
      for (i = key & mask_; slots_[i].key != kEmpty;) i = (i + 1) & mask_;
    }
    slots_[i].key = key;
    slots_[i].value = value;
    ++size_;
    return true;
  }

  bool erase(uint64_t key) {
    size_t i = key & mask_;
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == kEmpty) return false;
    }
    // Backward shift: pull later members of the probe run into the hole, so
    // lookups never need tombstones.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (slots_[j].key == kEmpty) break;
      const size_t home = slots_[j].key & mask_;
      // Move j into i when its home is not within (i, j] cyclically.
      if (((j - home) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].key = kEmpty;
    --size_;
    return true;
  }

  void clear() {
    for (Slot& slot : slots_) slot.key = kEmpty;
    size_ = 0;
  }

  // f(key, value&) for every entry, in table order (do not insert or erase inside).
  template <class F>
  void for_each(F f) {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].key != kEmpty) f(slots_[i].key, slots_[i].value);
  }
  template <class F>
  void for_each(F f) const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].key != kEmpty) f(slots_[i].key, static_cast<const V&>(slots_[i].value));
  }

 private:
  struct Slot {
    uint64_t key;
    V value;
  };
  static size_t capacity_for(size_t n) {
    size_t c = 16;
    while (c * 7 < n * 10) c *= 2;
    return c;
  }
  void rehash(size_t capacity) {
    std::vector<Slot> old_slots;
    old_slots.reserve(capacity);
    advise_heap_growth();  // before the fill touches it: a router's index tables reach 64 MB each
    old_slots.assign(capacity, Slot{kEmpty, V()});
    old_slots.swap(slots_);
    mask_ = capacity - 1;
    // The most entries before it grows: (size + 1) * 10 > capacity * 7 once size reaches this.
    max_size_ = capacity * 7 / 10;
    size_ = 0;
    for (const Slot& slot : old_slots)
      if (slot.key != kEmpty) (*this)[slot.key] = slot.value;
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t mask_ = 0;
  size_t max_size_ = 0;  // grows before inserting past this (70% of the slots)
};

}  // namespace testbed
