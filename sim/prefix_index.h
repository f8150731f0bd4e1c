// Router-side views of which instance caches which prefix blocks.
//
// PrefixIndex maps a block hash to the instances holding it. The precise
// routers build it only from the instances' KvEvents (stores and evictions, as
// llm-d's precise scorer consumes vLLM's events), so it forgets what was
// evicted. The approximate routers fill it with what they routed, bounded by
// an LRU per instance (RoutedBlocksLru), and never hear of evictions (as the
// Gateway API Inference Extension's approximate scorer and SGLang's router tree).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/flat_hash_map.h"
#include <vector>

#include "engine/kv_event.h"
#include "sim/instance_set.h"

namespace testbed {

// Instances come in groups of 64 (sim/instance_set.h), each with its own
// table hash -> word of holders: a block costs one 16-byte entry per group
// that holds it, and a match looks a block up only in the groups where the
// chain is still alive. Which groups hold a chain's first block is kept apart
// (first block -> word of groups, up to 64 groups: 4,096 instances), so a
// match asks only those groups about it, and a prompt nobody holds costs one
// lookup: no part of a decision's index work grows with the fleet. Beyond
// 4,096 instances every group is asked about the first block. A fleet of up
// to 64 instances is one group: the table, and every routing decision, as before.
class PrefixIndex {
 public:
  // `expected_blocks`: entries to size the tables for up front (growth rehashes one).
  explicit PrefixIndex(int num_instances, size_t expected_blocks = 16);
  // `first_block`: the hash opens its chain (KvEvent::first_block); a hash
  // must be stored and removed with the same flag.
  void add(uint64_t hash, int instance, bool first_block);
  void remove(uint64_t hash, int instance, bool first_block);
  void clear_instance(int instance);
  void apply(int instance, const KvEvent& event);
  // Events in order, their table slots loaded a few events ahead.
  void apply(int instance, const KvEvent* events, size_t n);
  // Longest run of leading `hashes` each instance holds, in blocks; out[i] for instance i.
  void match(const std::vector<uint64_t>& hashes, std::vector<int>& out) const;
  // Entries: (block, group) pairs held by some instance.
  size_t size() const;
  // Calls f(hash, instances) for every entry, in no particular order: once per
  // block and group of 64 instances that holds it.
  template <class F>
  void for_each(F f) const {
    for (size_t g = 0; g < groups_.size(); ++g)
      groups_[g].for_each([&](uint64_t hash, uint64_t w) { f(hash, InstanceSet(static_cast<int>(g), w)); });
  }

 private:
  int num_instances_;
  std::vector<FlatHashMap64<uint64_t>> groups_;
  bool track_first_ = false;  // 2 to 64 groups: first_ is kept
  FlatHashMap64<uint64_t> first_;  // a chain's first block -> word of the groups holding it
  void forget_first(uint64_t hash, int group);
  mutable std::vector<std::pair<int, uint64_t>> alive_, next_;  // match()'s scratch: (group, still matching)
};

// A PrefixIndex built from KV events (the precise routers'), whose match for
// the next decision may be computed ahead (Router::prepare: by a fleet's
// worker once a window's events are applied, while the replay goes on) and
// is kept only while no event has come since and the request is the one it
// was computed for: a decision's match is the same either way.
class KvEventIndex {
 public:
  KvEventIndex(int num_instances, size_t expected_blocks) : index_(num_instances, expected_blocks) {}
  void apply(int instance, const KvEvent& event) {
    ++version_;
    index_.apply(instance, event);
  }
  void apply(int instance, const KvEvent* events, size_t n) {
    ++version_;
    index_.apply(instance, events, n);
  }
  void prepare(int64_t request, const std::vector<uint64_t>& hashes);
  // The longest run of leading `hashes` (request `request`'s) each instance holds.
  const std::vector<int>& match(int64_t request, const std::vector<uint64_t>& hashes);
  const PrefixIndex& index() const { return index_; }
  int64_t num_reused() const { return num_reused_; }  // matches answered by a prepared one

 private:
  PrefixIndex index_;
  uint64_t version_ = 0;  // KV-event calls so far
  int64_t num_reused_ = 0;
  std::vector<int> matched_;
  // What matched_ was prepared for (valid: not used yet). A block's hash
  // covers every block before it, so the last hash and the count name the chain.
  struct Prepared {
    bool valid = false;
    int64_t request = 0;
    uint64_t version = 0;
    size_t size = 0;
    uint64_t last = 0;
  } prepared_;
};

// What a router sent to each instance, at most `capacity` blocks per instance
// (least recently routed forgotten first), mirrored into a PrefixIndex.
class RoutedBlocksLru {
 public:
  RoutedBlocksLru(int num_instances, int64_t capacity_blocks);
  void record(int instance, const std::vector<uint64_t>& hashes);
  const PrefixIndex& index() const { return index_; }
  int64_t size(int instance) const { return lru_[instance].size; }

 private:
  // An intrusive doubly linked list over a node array per instance (front =
  // most recently routed), with a flat map from hash to node: no allocation
  // per routed block once the arrays have grown.
  struct Node {
    uint64_t hash;
    int32_t prev, next;
    bool first_block;
  };
  struct Lru {
    std::vector<Node> nodes;
    std::vector<int32_t> spare;  // freed node slots
    FlatHashMap64<int32_t> where;
    int32_t head = -1, tail = -1;
    int64_t size = 0;
  };
  void unlink(Lru& lru, int32_t n);
  void push_front(Lru& lru, int32_t n);

  int64_t capacity_;
  PrefixIndex index_;
  std::vector<Lru> lru_;
};

}  // namespace testbed
