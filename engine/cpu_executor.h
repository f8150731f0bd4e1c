// CpuExecutor: the real Llama-family forward pass on the CPU, over the paged KV
// cache (Eigen for the matrix products; attention reads K/V through each
// sequence's block table). Slow and exact: the project's correctness oracle.
// Step durations are measured on the wall clock.
#pragma once

#include <functional>

#include <memory>
#include <vector>

#include "engine/executor.h"
#include "engine/kv_layout.h"
#include "engine/model/cpu_ops.h"
#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"

namespace testbed {

// `w` at cfg.precision (engine/model/quantize_weights.h): unchanged for "",
// round-tripped linears for fp8 and w4a16, after a calibration pass of the
// unquantized model for gptq and awq.
LlamaWeights quantized_weights(const ModelConfig& cfg, LlamaWeights w, int block_size);

class CpuExecutor : public Executor {
 public:
  CpuExecutor(const ModelConfig& cfg, LlamaWeights weights, int num_blocks, int block_size, int max_model_len);

  StepResult execute(const Batch& batch) override;
  std::string name() const override { return "cpu"; }
  // Bytes of block b, every layer: [layer][K, V][kv_head][slot][head_dim] floats.
  KvBlockData read_kv_blocks(const std::vector<int32_t>& blocks) const override;
  void write_kv_blocks(const std::vector<int32_t>& blocks, const KvBlockData& data) override;
  // Mean-pooled final hidden states of `prompt` (Executor::embed): the same
  // layers and ops as a step, the prompt's K/V in scratch blocks of its own,
  // so no block of the paged cache is read or written.
  // Throws std::invalid_argument for an empty prompt, one longer than
  // max_model_len, or a token outside the vocabulary.
  bool embed(const std::vector<int32_t>& prompt, std::vector<float>& out) override;

  // Called with every linear layer's input before it is multiplied (layer,
  // engine/model/quantize_weights.h's LinearIndex, rows x K values): how
  // GPTQ and AWQ collect calibration inputs.
  using LinearObserver = std::function<void(int layer, int linear, const float* in, int rows, int k)>;
  void set_linear_observer(LinearObserver f) { observer_ = std::move(f); }

  // Logits of the last step's verified rows, [rows, vocab] in batch-item order (for tests).
  const std::vector<float>& last_logits() const { return logits_; }
  const KvLayout& layout() const { return layout_; }

 private:
  ModelConfig cfg_;
  LlamaWeights w_;
  KvLayout layout_;
  RopeTable rope_;
  int max_model_len_;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer
  std::vector<float> x_, h_, q_, k_, v_, attn_, proj_, gate_, up_, logits_, scratch_;
  std::vector<float> embed_k_, embed_v_;  // embed(): one layer's K/V of the prompt, in blocks of layout_'s shape
  bool fp8_inputs_ = false;  // model.precision = fp8: inputs rounded to e4m3 per token
  LinearObserver observer_;
  // A linear's input as it multiplies: observed, divided by AWQ's scale, rounded to FP8.
  const float* prepare(const float* in, int rows, int k, int layer, int linear);
  // Every decoder layer over the residual stream x_ ([T, hidden]: token
  // embeddings in, last layer's output out) at `positions`; `attend(layer)`
  // turns that layer's q_, k_, v_ (RoPE applied) into attn_ ([T, q_size]).
  void run_layers(int T, const int32_t* positions, const std::function<void(int layer)>& attend);
};

}  // namespace testbed
