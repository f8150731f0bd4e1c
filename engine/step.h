// One engine step, as everyone outside the engine sees it:
//
//   StepPlan plan = engine.begin_step(now);                  // the scheduler's batch
//   StepResult result = engine.executor().execute(plan.batch);
//   StepOutcome out = engine.end_step(plan, result, end);     // what the step did
//
// The outcome is the only way a driver, the fleet or a test learns what
// happened: tokens appended (and proposed tokens accepted) per sequence,
// finished sequences, and sequences handed off to another engine with the KV
// blocks to transfer. Nobody infers it from queue sizes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/batch.h"
#include "engine/kv_cache_manager.h"

namespace testbed {

struct StepPlan {
  Batch batch;
  double start_s = 0.0;
  bool empty() const { return batch.empty(); }
};

// What one batch item did.
struct SeqOutcome {
  Sequence* seq = nullptr;  // valid until the engine's next begin_step
  int num_appended = 0;     // output tokens appended (0 for a prompt chunk that does not sample)
  int num_draft = 0;        // proposed tokens verified
  int num_accepted = 0;     // of which accepted (num_appended = num_accepted + 1 when it samples)
  bool first_token = false; // the step produced the sequence's first output token
  bool finished = false;
  bool handed_off = false;  // left this engine (see StepOutcome::handed_off)
  bool cancelled = false;   // its client disconnected once it held Request::cancel_after_tokens tokens
  double previous_token_s = -1.0;  // when the sequence's tokens were last delivered before this step
};

// A sequence that leaves its engine after its prefill, with its KV: the
// blocks stay held by the source engine until release_export(seq->id()).
struct HandOff {
  std::unique_ptr<Sequence> seq;
  KvExport kv;
};

struct StepOutcome {
  double start_s = 0.0, end_s = 0.0;
  std::vector<SeqOutcome> seqs;    // one per batch item, in batch order
  std::vector<int64_t> preempted;  // ids preempted while the batch was formed
  int num_finished = 0;
  int num_cancelled = 0;  // by output-token count (SeqOutcome::cancelled)
  std::vector<HandOff> handed_off;
};

}  // namespace testbed
