// What one engine step runs (the scheduler's output, the executor's input) and
// what it returns.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sequence.h"

namespace testbed {

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int num_computed = 0;  // tokens already in the KV cache before this step
  int num_new = 0;       // tokens this step computes: positions [num_computed, num_computed + num_new)
  // The step samples a token for this sequence when it computes the last known token.
  bool samples() const { return num_computed + num_new == seq->num_tokens(); }
  // Decode: the new token follows a computed prompt (recomputation after preemption is prefill).
  bool is_decode() const { return num_computed >= seq->num_prompt_tokens(); }
};

struct Batch {
  std::vector<ScheduledSeq> items;
  std::vector<int64_t> preempted;  // ids preempted while forming this batch
  int num_prefill_tokens = 0;
  int num_decode_tokens = 0;

  bool empty() const { return items.empty(); }
  int num_tokens() const { return num_prefill_tokens + num_decode_tokens; }
  int num_seqs() const { return static_cast<int>(items.size()); }
};

struct StepResult {
  std::vector<int32_t> tokens;  // one per batch item; -1 where the item does not sample
  double duration_s = 0.0;      // measured (real executors) or predicted (simulated)
};

}  // namespace testbed
