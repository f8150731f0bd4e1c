// Executor: runs one step's batch. Three implementations share this interface:
// CpuExecutor (the real model, Eigen), CudaExecutor (the real model, this
// project's kernels) and SimExecutor (no model; a cost model predicts time).
// They register by name (executor.kind) and are built from an ExecutorSetup.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <string>
#include <vector>

#include "engine/batch.h"
#include "engine/common/registry.h"
#include "engine/cost_model.h"
#include "engine/model/model_config.h"
#include "kernels/spec/verify_ref.h"

namespace testbed {

// The K/V contents of some blocks, every layer, in the executor's own layout
// (equal executors read and write the same bytes). Empty for executors that
// hold no contents (the simulator moves block counts and hashes only).
struct KvBlockData {
  int num_blocks = 0;
  std::vector<uint8_t> bytes;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Computes K/V for every item's new positions (into the blocks of its block
  // table) and, for each item that samples, returns the tokens it appends
  // (batch.h: accepted drafts, then one sampled token).
  virtual StepResult execute(const Batch& batch) = 0;
  // The same into `out`, which an executor may fill reusing its buffers (the
  // simulator calls this one, step after step).
  virtual void execute(const Batch& batch, StepResult& out) { out = execute(batch); }
  virtual std::string name() const = 0;
  // What a KV transfer between two engines copies (prefill/decode hand-off).
  virtual KvBlockData read_kv_blocks(const std::vector<int32_t>& blocks) const {
    return KvBlockData{static_cast<int>(blocks.size()), {}};
  }
  virtual void write_kv_blocks(const std::vector<int32_t>& blocks, const KvBlockData& data);
  // Rejection-sampling verification of a batch of drafts (kernels/spec/verify_ref.h,
  // host pointers; spec.verify = rejection): the CPU reference here, this
  // project's CUDA kernel in the CUDA executor.
  virtual void verify_rejection(const VerifyBatch& batch, const VerifyOutput& out) {
    verify_rejection_ref(batch, out);
  }
  // The prompt's embedding for the ingress cache (engine/ingress.h): the mean
  // over its positions of the model's final hidden states (after the final
  // norm, before the LM head), out = [hidden_size], from a forward pass of its
  // own that reads no KV block and changes no state a step depends on. False
  // (out untouched): this executor has no model to embed with.
  virtual bool embed(const std::vector<int32_t>& /*prompt*/, std::vector<float>& /*out*/) { return false; }
};

// One request's speculation as a real run measured it (spec.acceptance =
// trace:FILE): the share of its decode steps that verified drafts, the drafts
// such a step carried on average, and the per-token acceptance that explains
// the share of drafts it accepted.
struct SpecRequestModel {
  double acceptance = 0.0, propose_share = 1.0, drafts_per_step = 0.0;
};

// What every executor is built from.
struct ExecutorSetup {
  ModelConfig model;
  std::string weights = "dummy";  // "dummy" (seeded) or a .safetensors file
  uint64_t weights_seed = 0;
  int num_blocks = 0, block_size = 16, max_model_len = 4096;
  std::shared_ptr<const CostModel> cost_model;  // executors that predict their time (sim)
  // Speculation in simulation (the simulated executor drafts and accepts itself):
  // k tokens per step, accepted one by one with probability spec_acceptance (< 0: off).
  int spec_num_tokens = 0, spec_max_batch_size = 0;
  double spec_acceptance = -1.0;
  uint64_t spec_seed = 0;
  // The draft model's cost model (spec.method = draft in simulation): its k steps are added to each step.
  std::shared_ptr<const CostModel> spec_draft_cost_model;
  // Per request id, its own speculation instead (spec.acceptance = trace:FILE).
  std::shared_ptr<const std::unordered_map<int64_t, SpecRequestModel>> spec_per_request;
};

using ExecutorRegistry = Registry<Executor, const ExecutorSetup&>;

}  // namespace testbed
