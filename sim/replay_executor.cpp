#include "sim/replay_executor.h"

#include <stdexcept>

#include "sim/sim_executor.h"

namespace testbed {

StepResult ReplayExecutor::execute(const Batch& batch) {
  if (next_ >= durations_.size())
    throw std::out_of_range("ReplayExecutor: step " + std::to_string(next_) + " was not recorded");
  StepResult r;
  r.tokens.assign(batch.items.size(), -1);
  for (size_t i = 0; i < batch.items.size(); ++i)
    if (batch.items[i].samples())
      r.tokens[i] = next_synthetic_token(*batch.items[i].seq, vocab_size_);
  r.duration_s = durations_[next_++];
  return r;
}

}  // namespace testbed
