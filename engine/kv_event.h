// KV-cache events: every block the prefix cache stores or evicts is published,
// so routers build their view of an instance from events alone, the way
// llm-d's precise prefix scorer consumes vLLM's KV events.
#pragma once

#include <cstdint>

namespace testbed {

struct KvEvent {
  enum class Kind : uint8_t { BlockStored, BlockRemoved, AllCleared };
  Kind kind = Kind::BlockStored;
  uint64_t block_hash = 0;   // BlockStored / BlockRemoved
  uint64_t parent_hash = 0;  // BlockStored: hash of the previous block (root hash for the first)
  int32_t num_tokens = 0;    // BlockStored: tokens in the block
};

class KvEventListener {
 public:
  virtual ~KvEventListener() = default;
  virtual void on_kv_event(const KvEvent& event) = 0;
};

}  // namespace testbed
