#include "sim/replay_executor.h"

#include <stdexcept>

#include "sim/sim_executor.h"

namespace testbed {

StepResult ReplayExecutor::execute(const Batch& batch) {
  if (next_ >= durations_.size())
    throw std::out_of_range("ReplayExecutor: step " + std::to_string(next_) + " was not recorded");
  StepResult r;
  synthetic_tokens(batch, vocab_size_, r);
  r.duration_s = durations_[next_++];
  return r;
}

}  // namespace testbed
