#include "sim/prefix_index.h"

#include <algorithm>

namespace testbed {

namespace {

constexpr int kGroupShift = 6;  // 64 instances a group
uint64_t bit_of(int instance) { return uint64_t{1} << (instance & (kInstancesPerGroup - 1)); }
uint64_t first_n(int n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

}  // namespace

PrefixIndex::PrefixIndex(int num_instances, size_t expected_blocks) : num_instances_(num_instances) {
  const int groups = (std::max(num_instances, 1) + kInstancesPerGroup - 1) / kInstancesPerGroup;
  groups_.reserve(groups);
  for (int g = 0; g < groups; ++g) groups_.emplace_back(groups == 1 ? expected_blocks : expected_blocks / groups + 16);
  track_first_ = groups > 1 && groups <= 64;
}

size_t PrefixIndex::size() const {
  size_t n = 0;
  for (const auto& g : groups_) n += g.size();
  return n;
}

void PrefixIndex::add(uint64_t hash, int instance, bool first_block) {
  const int group = instance >> kGroupShift;
  uint64_t& w = groups_[group][hash];
  if (w == 0 && first_block && track_first_) first_[hash] |= uint64_t{1} << group;  // the group holds it now
  w |= bit_of(instance);
}

void PrefixIndex::forget_first(uint64_t hash, int group) {
  uint64_t* groups = first_.find(hash);
  if (!groups) return;
  *groups &= ~(uint64_t{1} << group);
  if (*groups == 0) first_.erase(hash);
}

void PrefixIndex::remove(uint64_t hash, int instance, bool first_block) {
  const int group = instance >> kGroupShift;
  FlatHashMap64<uint64_t>& g = groups_[group];
  uint64_t* w = g.find(hash);
  if (!w) return;
  *w &= ~bit_of(instance);
  if (*w != 0) return;
  g.erase(hash);
  if (first_block && track_first_) forget_first(hash, group);  // no instance of the group holds it any more
}

void PrefixIndex::clear_instance(int instance) {
  const int group = instance >> kGroupShift;
  FlatHashMap64<uint64_t>& g = groups_[group];
  const uint64_t bit = bit_of(instance);
  std::vector<uint64_t> emptied;
  g.for_each([&](uint64_t hash, uint64_t& w) {
    w &= ~bit;
    if (w == 0) emptied.push_back(hash);
  });
  for (uint64_t h : emptied) {
    g.erase(h);
    if (track_first_) forget_first(h, group);  // rare (a failure, a replica off): every emptied hash is checked
  }
}

void PrefixIndex::apply(int instance, const KvEvent& e) {
  switch (e.kind) {
    case KvEvent::Kind::BlockStored: add(e.block_hash, instance, e.first_block); break;
    case KvEvent::Kind::BlockRemoved: remove(e.block_hash, instance, e.first_block); break;
    case KvEvent::Kind::AllCleared: clear_instance(instance); break;
  }
}

void PrefixIndex::apply(int instance, const KvEvent* events, size_t n) {
  const FlatHashMap64<uint64_t>& g = groups_[instance >> kGroupShift];
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < std::min(kAhead, n); ++i) g.prefetch(events[i].block_hash);
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) g.prefetch(events[i + kAhead].block_hash);
    apply(instance, events[i]);
  }
}

void KvEventIndex::prepare(int64_t request, const std::vector<uint64_t>& hashes) {
  index_.match(hashes, matched_);
  prepared_ = Prepared{true, request, version_, hashes.size(), hashes.empty() ? 0 : hashes.back()};
}

const std::vector<int>& KvEventIndex::match(int64_t request, const std::vector<uint64_t>& hashes) {
  const Prepared& p = prepared_;
  const bool reuse = p.valid && p.request == request && p.version == version_ && p.size == hashes.size() &&
                     (hashes.empty() || p.last == hashes.back());
  prepared_.valid = false;
  if (reuse)
    ++num_reused_;
  else
    index_.match(hashes, matched_);
  return matched_;
}

void PrefixIndex::match(const std::vector<uint64_t>& hashes, std::vector<int>& out) const {
  out.assign(num_instances_, 0);
  constexpr size_t kAhead = 8;  // overlap the table's cache misses (see FlatHashMap64::prefetch)
  const auto record = [&](int group, uint64_t w, size_t k) {
    for (; w; w &= w - 1) out[(group << kGroupShift) + __builtin_ctzll(w)] = static_cast<int>(k);
  };
  if (groups_.size() == 1) {  // up to 64 instances: one word carries the whole match
    const FlatHashMap64<uint64_t>& index = groups_[0];
    uint64_t alive = first_n(num_instances_);
    for (size_t k = 0; k < std::min(kAhead, hashes.size()); ++k) index.prefetch(hashes[k]);
    size_t k = 0;
    for (; k < hashes.size(); ++k) {
      if (k + kAhead < hashes.size()) index.prefetch(hashes[k + kAhead]);
      const uint64_t* holders = index.find(hashes[k]);
      const uint64_t now = holders ? (alive & *holders) : 0;
      record(0, alive & ~now, k);
      alive = now;
      if (alive == 0) return;
    }
    record(0, alive, k);
    return;
  }
  // Groups of 64: only those where some instance still matches are asked about the next block.
  // The groups holding the first block are asked about it; a group still
  // matching is asked about the blocks kGroupAhead ahead of time (a shared
  // prefix's chain runs on in the same groups).
  constexpr size_t kGroupAhead = 4;
  alive_.clear();
  if (hashes.empty()) return;
  const auto start = [&](int g) {
    alive_.emplace_back(g, first_n(num_instances_ - g * kInstancesPerGroup));
    groups_[g].prefetch(hashes[0]);
  };
  if (track_first_) {
    const uint64_t* holding = first_.find(hashes[0]);
    for (uint64_t m = holding ? *holding : 0; m; m &= m - 1) start(__builtin_ctzll(m));
  } else {
    for (size_t g = 0; g < groups_.size(); ++g) start(static_cast<int>(g));
  }
  size_t k = 0;
  for (; k < hashes.size(); ++k) {
    next_.clear();
    for (const auto& [g, w] : alive_) {
      const uint64_t* holders = groups_[g].find(hashes[k]);
      const uint64_t now = holders ? (w & *holders) : 0;
      record(g, w & ~now, k);
      if (!now) continue;
      next_.emplace_back(g, now);
      for (size_t a = k == 0 ? 1 : k + kGroupAhead; a <= k + kGroupAhead && a < hashes.size(); ++a)
        groups_[g].prefetch(hashes[a]);
    }
    alive_.swap(next_);
    if (alive_.empty()) return;
  }
  for (const auto& [g, w] : alive_) record(g, w, k);
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
    const bool first = rit + 1 == hashes.rend();  // hashes[0]: the chain's first block
    lru.nodes[n].hash = h;
    lru.nodes[n].first_block = first;
    push_front(lru, n);
    lru.where[h] = n;
    ++lru.size;
    index_.add(h, instance, first);
  }
  while (lru.size > capacity_) {
    const int32_t old = lru.tail;
    const uint64_t h = lru.nodes[old].hash;
    const bool first = lru.nodes[old].first_block;
    unlink(lru, old);
    lru.where.erase(h);
    lru.spare.push_back(old);
    --lru.size;
    index_.remove(h, instance, first);
  }
}

}  // namespace testbed
