#include "sim/prefix_index.h"

#include <algorithm>

namespace testbed {

void PrefixIndex::add(uint64_t hash, int instance) { index_[hash].insert(instance); }

void PrefixIndex::remove(uint64_t hash, int instance) {
  InstanceSet* set = index_.find(hash);
  if (!set) return;
  set->erase(instance);
  if (set->empty()) index_.erase(hash);
}

void PrefixIndex::clear_instance(int instance) {
  std::vector<uint64_t> emptied;
  index_.for_each([&](uint64_t hash, InstanceSet& set) {
    set.erase(instance);
    if (set.empty()) emptied.push_back(hash);
  });
  for (uint64_t h : emptied) index_.erase(h);
}

void PrefixIndex::apply(int instance, const KvEvent& e) {
  switch (e.kind) {
    case KvEvent::Kind::BlockStored: add(e.block_hash, instance); break;
    case KvEvent::Kind::BlockRemoved: remove(e.block_hash, instance); break;
    case KvEvent::Kind::AllCleared: clear_instance(instance); break;
  }
}

void PrefixIndex::match(const std::vector<uint64_t>& hashes, std::vector<int>& out) const {
  out.assign(num_instances_, 0);
  InstanceSet alive = InstanceSet::all(num_instances_);
  constexpr size_t kAhead = 8;  // overlap the table's cache misses (see FlatHashMap64::prefetch)
  for (size_t k = 0; k < std::min(kAhead, hashes.size()); ++k) index_.prefetch(hashes[k]);
  size_t k = 0;
  for (; k < hashes.size(); ++k) {
    if (k + kAhead < hashes.size()) index_.prefetch(hashes[k + kAhead]);
    const InstanceSet* holders = index_.find(hashes[k]);
    const InstanceSet now = holders ? (alive & *holders) : InstanceSet();
    alive.minus(now).for_each([&](int i) { out[i] = static_cast<int>(k); });
    alive = now;
    if (alive.empty()) return;
  }
  alive.for_each([&](int i) { out[i] = static_cast<int>(k); });
}

RoutedBlocksLru::RoutedBlocksLru(int num_instances, int64_t capacity_blocks)
    : capacity_(capacity_blocks), index_(num_instances), lru_(num_instances) {}

void RoutedBlocksLru::unlink(Lru& lru, int32_t n) {
  Node& node = lru.nodes[n];
  if (node.prev >= 0) lru.nodes[node.prev].next = node.next; else lru.head = node.next;
  if (node.next >= 0) lru.nodes[node.next].prev = node.prev; else lru.tail = node.prev;
}

void RoutedBlocksLru::push_front(Lru& lru, int32_t n) {
  Node& node = lru.nodes[n];
  node.prev = -1;
  node.next = lru.head;
  if (lru.head >= 0) lru.nodes[lru.head].prev = n; else lru.tail = n;
  lru.head = n;
}

void RoutedBlocksLru::record(int instance, const std::vector<uint64_t>& hashes) {
  Lru& lru = lru_[instance];
  // Back to front, so a prefix's first blocks end up most recent and are
  // forgotten last (a chain is useless without its head).
  for (auto rit = hashes.rbegin(); rit != hashes.rend(); ++rit) {
    const uint64_t h = *rit;
    if (const int32_t* n = lru.where.find(h)) {
      if (*n != lru.head) {
        unlink(lru, *n);
        push_front(lru, *n);
      }
      continue;
    }
    int32_t n;
    if (!lru.spare.empty()) {
      n = lru.spare.back();
      lru.spare.pop_back();
    } else {
      n = static_cast<int32_t>(lru.nodes.size());
      lru.nodes.push_back(Node{});
    }
    lru.nodes[n].hash = h;
    push_front(lru, n);
    lru.where[h] = n;
    ++lru.size;
    index_.add(h, instance);
  }
  while (lru.size > capacity_) {
    const int32_t old = lru.tail;
    const uint64_t h = lru.nodes[old].hash;
    unlink(lru, old);
    lru.where.erase(h);
    lru.spare.push_back(old);
    --lru.size;
    index_.remove(h, instance);
  }
}

}  // namespace testbed
