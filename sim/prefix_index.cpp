#include "sim/prefix_index.h"

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
  size_t k = 0;
  for (; k < hashes.size(); ++k) {
    const InstanceSet* holders = index_.find(hashes[k]);
    const InstanceSet now = holders ? (alive & *holders) : InstanceSet();
    alive.minus(now).for_each([&](int i) { out[i] = static_cast<int>(k); });
    alive = now;
    if (alive.empty()) return;
  }
  alive.for_each([&](int i) { out[i] = static_cast<int>(k); });
}

RoutedBlocksLru::RoutedBlocksLru(int num_instances, int64_t capacity_blocks)
    : capacity_(capacity_blocks), index_(num_instances), lru_(num_instances), where_(num_instances) {}

void RoutedBlocksLru::record(int instance, const std::vector<uint64_t>& hashes) {
  auto& lru = lru_[instance];
  auto& where = where_[instance];
  // Back to front, so a prefix's first blocks end up most recent and are
  // forgotten last (a chain is useless without its head).
  for (auto rit = hashes.rbegin(); rit != hashes.rend(); ++rit) {
    const uint64_t h = *rit;
    auto it = where.find(h);
    if (it != where.end()) {
      lru.splice(lru.begin(), lru, it->second);
      continue;
    }
    lru.push_front(h);
    where.emplace(h, lru.begin());
    index_.add(h, instance);
  }
  while (static_cast<int64_t>(lru.size()) > capacity_) {
    const uint64_t old = lru.back();
    lru.pop_back();
    where.erase(old);
    index_.remove(old, instance);
  }
}

}  // namespace testbed
