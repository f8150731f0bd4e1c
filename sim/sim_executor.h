// SimExecutor: no model. Each sampling sequence gets a synthetic token (the
// request's scripted output when it has one, else a token derived from the
// request id and position), and the step's duration is the cost model's
// prediction. CostTimedExecutor runs a real executor but reports the cost
// model's time instead of the wall clock's (deterministic real-token runs).
#pragma once

#include <memory>

#include "engine/executor.h"
#include "sim/cost_model.h"

namespace testbed {

class SimExecutor : public Executor {
 public:
  SimExecutor(std::shared_ptr<const CostModel> cost_model, int vocab_size)
      : cost_model_(std::move(cost_model)), vocab_size_(vocab_size) {}
  StepResult execute(const Batch& batch) override;
  std::string name() const override { return "sim"; }

 private:
  std::shared_ptr<const CostModel> cost_model_;
  int vocab_size_;
};

class CostTimedExecutor : public Executor {
 public:
  CostTimedExecutor(std::unique_ptr<Executor> inner, std::shared_ptr<const CostModel> cost_model)
      : inner_(std::move(inner)), cost_model_(std::move(cost_model)) {}
  StepResult execute(const Batch& batch) override {
    StepResult r = inner_->execute(batch);
    r.duration_s = cost_model_->predict(batch);
    return r;
  }
  std::string name() const override { return inner_->name() + "+" + cost_model_->name(); }

 private:
  std::unique_ptr<Executor> inner_;
  std::shared_ptr<const CostModel> cost_model_;
};

// The synthetic token a simulated sequence emits at output index `index`.
int32_t synthetic_token(const Request& request, int index, int vocab_size);
// The same for the sequence's next output token (reads only its hot fields).
int32_t next_synthetic_token(const Sequence& seq, int vocab_size);

}  // namespace testbed
