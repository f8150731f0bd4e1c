// RooflineCostModel ("roofline"): the time of one engine step from the FLOPs and
// HBM bytes of each op of a Llama-family decoder against a HardwareSpec, per GPU
// of a tensor-parallel group. Each op costs max(FLOPs / achieved FLOP/s,
// bytes / achieved bandwidth) (Williams et al., "Roofline", CACM 2009); ops run
// one after another, so the step is their sum plus the TP all-reduces plus the
// spec's per-step overhead. Ops, summed over layers:
//   qkv_proj, o_proj, mlp_gate_up, mlp_down   GEMMs over all T new tokens; weights read once per step
//                                             (MoE layers: the router, the shared experts, and the
//                                             routed experts the step's tokens touch, E (1 - (1 - k/E)^T)
//                                             of E in expectation under uniform top-k routing; T k
//                                             token-expert pairs of FLOPs; with expert parallelism,
//                                             the busiest of the expert groups, and expert GEMM
//                                             widths rounded up to compute.gemm_tile_n)
//   lm_head                                   GEMM over the rows that sample only
//   attn_prefill, attn_decode                 4*Hq*d*n*(c+(n+1)/2) FLOPs (causal QK^T and PV) and
//                                             2*Hkv*d*(c+n) K/V elements read, per sequence and layer
//   elementwise                               RMSNorms, residual adds, SwiGLU, embedding rows (bytes only)
// model.precision changes the linear layers: fp8 reads 1 byte a weight and
// runs at the FP8 peak; w4a16 reads 4 bits (plus a 16-bit scale and 4-bit zero
// per group) and adds its dequantization (4 ALU operations a weight, once per
// 64 rows, at the FP32 CUDA-core rate) to the GEMM's compute time; the LM head
// stays 16-bit.
// A weight GEMM costs hw.combine(compute, memory): max() unless the spec fits
// compute.overlap_exponent; each decoder layer adds step.layer_overhead_s.
// Also here: the decode batch size at which decode turns compute-bound (KV
// capacity from memory is sim/memory_planner.h). `testbed roofline` prints both.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "sim/cost_model.h"
#include "sim/hardware_spec.h"
#include "sim/memory_planner.h"

namespace testbed {

struct OpCost {
  const char* name = "";  // a literal: ops are named without allocating, step after step
  bool is_dense = false;  // a weight GEMM (projections, MLP, LM head)
  double flops = 0;       // per GPU
  double bytes = 0;       // HBM bytes per GPU
  double compute_s = 0;
  double memory_s = 0;
  double time_s() const { return compute_s > memory_s ? compute_s : memory_s; }
  bool is_compute_bound() const { return compute_s > memory_s; }
};

struct StepCost {
  std::array<OpCost, 8> ops;  // fixed order: the eight ops listed at the top of this file
  double compute_s = 0;     // sum of the ops' compute times
  double memory_s = 0;      // sum of the ops' memory times
  double roofline_s = 0;    // sum over ops of max(compute, memory)
  double comm_s = 0;        // tensor-parallel all-reduces (and the logits gather)
  double overhead_s = 0;    // the spec's per-step host overhead plus its per-layer fixed cost
  double total_s = 0;       // roofline_s + comm_s + overhead_s

  const OpCost& op(const std::string& name) const;  // throws std::out_of_range for an unknown name
  double dense_compute_s() const;
  double dense_memory_s() const;
};

// Where decode turns compute-bound: the batch size B* at which compute(B*) = memory(B*).
// Both terms are linear in B at a fixed context, so B* is exact (not rounded);
// for MoE models, whose expert bytes grow with B, it is the smallest integer
// batch (up to 65,536) at which compute reaches memory.
struct DecodeCrossover {
  int context = 0;
  double dense_batch = 0;  // weight GEMMs only: weights vs FLOPs; independent of context
  double step_batch = 0;   // every op at `context` (attention adds memory per sequence); +inf if never
};

class RooflineCostModel : public CostModel {
 public:
  // Throws ConfigError (cost_model.tensor_parallel, compute.*) when the model
  // cannot be split over `tensor_parallel` GPUs or the device lacks its dtype.
  // expert_parallel (MoE models): expert groups over the TP group (1: every expert split TP ways).
  RooflineCostModel(HardwareSpec hardware, ModelConfig model, int tensor_parallel, int expert_parallel = 1);

  // An empty shape costs nothing (no step runs).
  // breakdown(shape).total_s, bit for bit, without building the ops: the
  // weight GEMMs' terms depend only on the step's token and sampling-row
  // counts and are kept per thread for the last few counts seen.
  double predict(const StepShape& shape) const override;
  std::string name() const override { return "roofline"; }

  StepCost breakdown(const StepShape& shape) const;
  DecodeCrossover decode_crossover(int context) const;

  // Routed experts a step of `tokens` tokens touches, in expectation (uniform top-k routing).
  double experts_touched(double tokens) const;
  // Token-expert pairs of the busiest expert group (all T k pairs without expert parallelism).
  double busiest_group_pairs(double tokens) const;

  const HardwareSpec& hardware() const { return hw_; }
  const ModelConfig& model() const { return model_; }
  int tensor_parallel() const { return tp_; }

 private:
  // The attention sums of a step: its new tokens, sampling rows, and the
  // FLOPs and bytes of its prefill and decode attention.
  struct AttentionSums {
    double tokens = 0, rows = 0, prefill_flops = 0, prefill_bytes = 0, decode_flops = 0, decode_bytes = 0;
  };
  AttentionSums attention_sums(const StepShape& shape) const;
  // Fills the ops that depend only on the token and row counts (the weight
  // GEMMs, the LM head, the elementwise glue) and returns the
  // tensor-parallel communication seconds.
  double fill_dense_ops(double tokens, double rows, StepCost& cost) const;
  void fill_attention_ops(const AttentionSums& a, StepCost& cost) const;
  // What predict() reads of fill_dense_ops, summed in breakdown's order.
  struct DenseTerms {
    double dense_s = 0;        // roofline seconds of the five dense ops, summed in order
    double elementwise_s = 0;  // the last op's
    double comm_s = 0;
  };
  DenseTerms dense_terms(double tokens, double rows) const;
  double all_reduce_s(double bytes) const;
  void add_experts(double tokens, double layers, OpCost& gate_up, OpCost& down) const;
  // W4A16: the seconds of dequantizing `weights` weights for a GEMM of `rows` rows (0 otherwise).
  double dequant_s(double rows, double weights) const;

  HardwareSpec hw_;
  ModelConfig model_;
  int tp_, ep_;
  bool w4a16_ = false;  // model.precision = w4a16: dequantization costs ALU time per 64-row tile
  double gemm_flops_, lm_flops_, attn_flops_, bandwidth_, kv_bandwidth_, dequant_ops_ = 1;
  TpSplit split_{};  // of model_ over tp_, and the model's byte widths and layer counts
  double weight_bytes_ = 0, act_bytes_ = 0, lm_weight_bytes_ = 0, dense_layers_ = 0, moe_layers_ = 0, moe_width_ = 0;
  uint64_t memo_id_;  // this model's key in predict's per-thread memo (never reused, unlike an address)
};

DecodeCrossover decode_crossover(const HardwareSpec& hardware, const ModelConfig& model, int tensor_parallel,
                                 int context);

}  // namespace testbed
