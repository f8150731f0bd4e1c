// ReplayExecutor: a simulated executor whose k-th step lasts exactly the k-th
// recorded duration (synthetic tokens, as SimExecutor). With the durations of
// a real run it replays that run's timeline inside the simulator; the step
// identity test uses it to prove the simulator drives the very same scheduler.
#pragma once

#include <vector>

#include "engine/executor.h"

namespace testbed {

class ReplayExecutor : public Executor {
 public:
  ReplayExecutor(std::vector<double> durations, int vocab_size)
      : durations_(std::move(durations)), vocab_size_(vocab_size) {}
  // Throws std::out_of_range when asked for more steps than were recorded.
  StepResult execute(const Batch& batch) override;
  std::string name() const override { return "replay"; }

 private:
  std::vector<double> durations_;
  int vocab_size_;
  size_t next_ = 0;
};

}  // namespace testbed
