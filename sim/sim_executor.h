// SimExecutor: no model. Each sampling sequence gets a synthetic token (the
// request's scripted output when it has one, else a token derived from the
// request id and position), and the step's duration is the cost model's
// prediction. CostTimedExecutor runs a real executor but reports the cost
// model's time instead of the wall clock's (deterministic real-token runs).
#pragma once

#include <memory>
#include <unordered_map>

#include "engine/cost_model.h"
#include "engine/executor.h"

namespace testbed {

// Speculation (spec.method with spec.acceptance = fixed:A): after each sampled
// token the executor drafts the sequence's next k synthetic tokens (a proposer
// that costs nothing, as the n-gram lookup nearly does) and, verifying them in
// the next step, keeps each in turn with probability A (a draw from seed,
// request and position), stopping at the first rejection. Drafts are the
// sequence's own future tokens, so outputs equal plain decoding's; only the
// steps differ.
struct SimSpeculation {
  int num_tokens = 0;      // k (0: off)
  int max_batch_size = 0;  // above it no drafts (0: no limit)
  double acceptance = 0.0;
  uint64_t seed = 0;
  // The draft model's steps (spec.method = draft): after each target step, the
  // sequences that draft run one step over their new tokens and k - 1 one-token
  // steps, priced by this cost model and added to the step (null: drafting is free).
  std::shared_ptr<const CostModel> draft_cost_model;
  // Per request id (spec.acceptance = trace:FILE): how often it drafts, how many
  // tokens, and its acceptance; a request absent from it is an error.
  std::shared_ptr<const std::unordered_map<int64_t, SpecRequestModel>> per_request;
};

class SimExecutor : public Executor {
 public:
  SimExecutor(std::shared_ptr<const CostModel> cost_model, int vocab_size, SimSpeculation spec = {})
      : cost_model_(std::move(cost_model)), vocab_size_(vocab_size), spec_(spec) {}
  StepResult execute(const Batch& batch) override;
  void execute(const Batch& batch, StepResult& out) override;
  std::string name() const override { return "sim"; }

 private:
  void speculate(const Batch& batch, StepResult& out) const;
  const SpecRequestModel& request_model(int64_t id) const;
  double draft_seconds(const Batch& batch, const StepResult& out) const;
  std::shared_ptr<const CostModel> cost_model_;
  int vocab_size_;
  SimSpeculation spec_;
};

class CostTimedExecutor : public Executor {
 public:
  CostTimedExecutor(std::unique_ptr<Executor> inner, std::shared_ptr<const CostModel> cost_model)
      : inner_(std::move(inner)), cost_model_(std::move(cost_model)) {}
  StepResult execute(const Batch& batch) override {
    StepResult r = inner_->execute(batch);
    shape_of(batch, shape_);
    r.duration_s = cost_model_->predict(shape_);
    return r;
  }
  std::string name() const override { return inner_->name() + "+" + cost_model_->name(); }
  KvBlockData read_kv_blocks(const std::vector<int32_t>& blocks) const override {
    return inner_->read_kv_blocks(blocks);
  }
  void write_kv_blocks(const std::vector<int32_t>& blocks, const KvBlockData& data) override {
    inner_->write_kv_blocks(blocks, data);
  }
  bool embed(const std::vector<int32_t>& prompt, std::vector<float>& out) override { return inner_->embed(prompt, out); }

 private:
  std::unique_ptr<Executor> inner_;
  std::shared_ptr<const CostModel> cost_model_;
  StepShape shape_;
};

// The synthetic token a simulated sequence emits at output index `index`.
int32_t synthetic_token(const Request& request, int index, int vocab_size);
// The same for the sequence's next output token (reads only its hot fields).
int32_t next_synthetic_token(const Sequence& seq, int vocab_size);
// One synthetic token for every item that samples (none for the others), into a cleared `result`.
void synthetic_tokens(const Batch& batch, int vocab_size, StepResult& result);

}  // namespace testbed
