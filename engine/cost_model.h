// CostModel: how long an engine step takes, predicted from the shape of its
// batch (per item: cached context, positions computed, logits sampled, decode
// or prompt). The interface lives here so executors may time steps with it
// (the simulated executor, a real executor timed deterministically); the
// models themselves (linear, roofline, profiled) are in sim/.
#pragma once

#include <string>
#include <vector>

#include "engine/batch.h"

namespace testbed {

// One batch item without its Sequence: what the cost depends on.
struct SeqShape {
  int num_computed = 0;   // context tokens already in the KV cache
  int num_new = 0;        // positions computed this step (proposed tokens included)
  bool samples = true;    // the step samples for it (runs the LM head)
  bool is_decode = true;  // attention goes to the decode op (else prefill)
  int num_draft = 0;      // proposed tokens verified: the LM head runs on num_draft + 1 rows
  int num_logit_rows() const { return samples ? num_draft + 1 : 0; }
};
// The one input of every cost model.
using StepShape = std::vector<SeqShape>;

// The shape of `batch`, into `out` (its capacity is reused step after step).
void shape_of(const Batch& batch, StepShape& out);
StepShape step_shape_of(const Batch& batch);
// `batch_size` sequences, each decoding one token after `context` cached tokens.
StepShape decode_shape(int batch_size, int context);
// One prompt chunk of `num_tokens` after `num_computed` cached tokens; samples when `samples`.
StepShape prefill_shape(int num_tokens, int num_computed = 0, bool samples = true);

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Seconds one step of this shape takes; an empty shape costs nothing.
  virtual double predict(const StepShape& shape) const = 0;
  virtual std::string name() const = 0;
};

}  // namespace testbed
