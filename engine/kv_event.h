// KV-cache events: every block the prefix cache stores or evicts is published,
// so routers build their view of an instance from events alone, the way
// llm-d's precise prefix scorer consumes vLLM's KV events.
#pragma once

#include <cstddef>
#include <cstdint>

namespace testbed {

struct KvEvent {
  enum class Kind : uint8_t { BlockStored, BlockRemoved, AllCleared };
  Kind kind = Kind::BlockStored;
  uint64_t block_hash = 0;   // BlockStored / BlockRemoved
  uint64_t parent_hash = 0;  // BlockStored: hash of the previous block (root hash for the first)
  int32_t num_tokens = 0;    // BlockStored: tokens in the block
  // BlockStored / BlockRemoved: the block opens its chain (its parent is the
  // root; vLLM's parent_block_hash = None). A block hash is first or not
  // whoever holds it; the routers' index finds a prompt's holders by it.
  bool first_block = false;
};

class KvEventListener {
 public:
  virtual ~KvEventListener() = default;
  virtual void on_kv_event(const KvEvent& event) = 0;
  // One step's events, in order (a listener that indexes them can overlap their cache misses).
  virtual void on_kv_events(const KvEvent* events, size_t n) {
    for (size_t i = 0; i < n; ++i) on_kv_event(events[i]);
  }
};

}  // namespace testbed
