// CpuExecutor: the real Llama-family forward pass on the CPU, over the paged KV
// cache (Eigen for the matrix products; attention reads K/V through each
// sequence's block table). Slow and exact: the project's correctness oracle.
// Step durations are measured on the wall clock.
#pragma once

#include <memory>
#include <vector>

#include "engine/executor.h"
#include "engine/kv_layout.h"
#include "engine/model/cpu_ops.h"
#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"

namespace testbed {

class CpuExecutor : public Executor {
 public:
  CpuExecutor(const ModelConfig& cfg, LlamaWeights weights, int num_blocks, int block_size, int max_model_len);

  StepResult execute(const Batch& batch) override;
  std::string name() const override { return "cpu"; }

  // Logits of the last step's sampling rows, [num_sampled, vocab] (for tests).
  const std::vector<float>& last_logits() const { return logits_; }
  const KvLayout& layout() const { return layout_; }

 private:
  ModelConfig cfg_;
  LlamaWeights w_;
  KvLayout layout_;
  RopeTable rope_;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer
  std::vector<float> x_, h_, q_, k_, v_, attn_, proj_, gate_, up_, logits_;
};

}  // namespace testbed
