// The roofline cost model's op-by-op FLOP and byte counts, KV capacity from
// memory and the decode crossover; formulas in sim/roofline_cost_model.h.
#include "sim/roofline_cost_model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "engine/config_error.h"

namespace testbed {
namespace {

// Per-GPU dimensions under Megatron-style tensor parallelism: heads and the MLP
// width split TP ways; K/V heads split too, or are replicated (one per GPU) when
// TP exceeds them, as vLLM does for GQA models.
struct Split {
  double layers, hidden, q_heads, kv_heads, head_dim, inter, vocab;
};

void check_split(const ModelConfig& m, int tp) {
  require(tp >= 1, "cost_model.tensor_parallel", "must be >= 1");
  require(m.num_heads % tp == 0, "cost_model.tensor_parallel",
          std::to_string(tp) + " does not divide the " + std::to_string(m.num_heads) + " attention heads of " +
              m.name);
  require(m.num_kv_heads % tp == 0 || tp % m.num_kv_heads == 0, "cost_model.tensor_parallel",
          std::to_string(tp) + " neither divides nor is a multiple of the " + std::to_string(m.num_kv_heads) +
              " KV heads of " + m.name);
}

Split split(const ModelConfig& m, int tp) {
  Split s;
  s.layers = m.num_layers;
  s.hidden = m.hidden_size;
  s.q_heads = static_cast<double>(m.num_heads) / tp;
  s.kv_heads = m.num_kv_heads >= tp ? static_cast<double>(m.num_kv_heads) / tp : 1.0;
  s.head_dim = m.head_dim;
  s.inter = static_cast<double>(m.intermediate_size) / tp;
  s.vocab = static_cast<double>(m.vocab_size) / tp;
  return s;
}

OpCost make_op(const char* name, bool dense, double flops, double bytes, double flop_rate, double bandwidth) {
  OpCost op;
  op.name = name;
  op.is_dense = dense;
  op.flops = flops;
  op.bytes = bytes;
  op.compute_s = flops / flop_rate;
  op.memory_s = bytes / bandwidth;
  return op;
}

// B* where compute(B) = memory(B), from the terms at B = 1 and B = 2 (both linear in B).
double crossing(double c1, double c2, double m1, double m2) {
  const double compute_slope = c2 - c1;
  const double memory_slope = m2 - m1;
  const double memory_fixed = m1 - memory_slope;
  const double c0 = c1 - compute_slope;  // 0 for these ops; kept so the algebra is general
  if (compute_slope <= memory_slope) return std::numeric_limits<double>::infinity();
  return std::max(0.0, (memory_fixed - c0) / (compute_slope - memory_slope));
}

}  // namespace

StepShape step_shape_of(const Batch& batch) {
  StepShape shape;
  shape.reserve(batch.items.size());
  for (const ScheduledSeq& item : batch.items)
    shape.push_back(SeqShape{item.num_computed, item.num_new, item.samples(), item.is_decode()});
  return shape;
}

StepShape decode_shape(int batch_size, int context) {
  return StepShape(static_cast<size_t>(std::max(batch_size, 0)), SeqShape{context, 1, true, true});
}

StepShape prefill_shape(int num_tokens, int num_computed, bool samples) {
  return StepShape{SeqShape{num_computed, num_tokens, samples, false}};
}

const OpCost& StepCost::op(const std::string& name) const {
  for (const OpCost& o : ops)
    if (name == o.name) return o;
  throw std::out_of_range("StepCost: no op named '" + name + "'");
}

double StepCost::dense_compute_s() const {
  double s = 0;
  for (const OpCost& o : ops)
    if (o.is_dense) s += o.compute_s;
  return s;
}

double StepCost::dense_memory_s() const {
  double s = 0;
  for (const OpCost& o : ops)
    if (o.is_dense) s += o.memory_s;
  return s;
}

int activation_bytes(const ModelConfig& model) { return std::max(model.dtype_bytes(), 2); }

double weight_bytes_per_gpu(const ModelConfig& m, int tp) {
  check_split(m, tp);
  const Split s = split(m, tp);
  const double h = s.hidden, d = s.head_dim;
  const double layer = h * (s.q_heads + 2 * s.kv_heads) * d + s.q_heads * d * h + 3 * h * s.inter + 2 * h +
                       (m.qk_norm ? 2 * d : 0);
  const double embed = s.vocab * h * (m.tie_word_embeddings ? 1 : 2);
  return (s.layers * layer + embed + h) * m.dtype_bytes();
}

double kv_bytes_per_token_per_gpu(const ModelConfig& m, int tp) {
  check_split(m, tp);
  const Split s = split(m, tp);
  return 2 * s.layers * s.kv_heads * s.head_dim * activation_bytes(m);
}

RooflineCostModel::RooflineCostModel(HardwareSpec hardware, ModelConfig model, int tensor_parallel)
    : hw_(std::move(hardware)), model_(std::move(model)), tp_(tensor_parallel) {
  hw_.validate();
  check_split(model_, tp_);
  require(tp_ == 1 || hw_.link_gbps > 0, "interconnect.bandwidth_gbps",
          "must be positive for tensor_parallel > 1 (" + hw_.origin + ")");
  gemm_flops_ = hw_.matmul_flops(model_.torch_dtype);
  attn_flops_ = hw_.attention_flops(model_.torch_dtype);
  bandwidth_ = hw_.achieved_bandwidth();
}

double RooflineCostModel::all_reduce_s(double bytes) const {
  // Ring all-reduce: each GPU sends and receives 2 (TP-1)/TP of the buffer
  // (Patarasuk & Yuan, JPDC 2009); the latency term covers the small messages of decode.
  return 2.0 * (tp_ - 1) / tp_ * bytes / hw_.achieved_link_bandwidth() + hw_.link_latency_s;
}

double RooflineCostModel::predict(const Batch& batch) const {
  scratch_.clear();
  for (const ScheduledSeq& item : batch.items)
    scratch_.push_back(SeqShape{item.num_computed, item.num_new, item.samples(), item.is_decode()});
  return breakdown(scratch_).total_s;
}

StepCost RooflineCostModel::breakdown(const StepShape& shape) const {
  StepCost cost;
  if (shape.empty()) return cost;
  const Split s = split(model_, tp_);
  const double L = s.layers, h = s.hidden, d = s.head_dim, I = s.inter, V = s.vocab;
  const double qd = s.q_heads * d, kvd = s.kv_heads * d;
  const double wb = model_.dtype_bytes(), ab = activation_bytes(model_);

  double T = 0, rows = 0;  // new tokens, sampling rows
  double prefill_flops = 0, prefill_bytes = 0, decode_flops = 0, decode_bytes = 0;
  for (const SeqShape& q : shape) {
    const double n = q.num_new, c = q.num_computed;
    T += n;
    if (q.samples) rows += 1;
    // Causal attention: token i of the chunk sees c + i + 1 keys; QK^T and PV are
    // 2 FLOPs per multiply-add each, so 4 * d per (query, key) pair per head.
    const double flops = L * 4 * s.q_heads * d * n * (c + (n + 1) / 2);
    // The whole K/V context (new tokens included) read once per KV head, since
    // GQA kernels share it across the query group; Q in, O out.
    const double bytes = L * (2 * kvd * (c + n) * ab + 2 * n * qd * ab);
    (q.is_decode ? decode_flops : prefill_flops) += flops;
    (q.is_decode ? decode_bytes : prefill_bytes) += bytes;
  }

  // A GEMM of T rows against a K x N weight: 2TKN FLOPs; weight read once, input read, output written.
  auto gemm = [&](const char* name, double rows_m, double k, double n, double repeat) {
    const double flops = repeat * 2 * rows_m * k * n;
    const double bytes = repeat * (k * n * wb + rows_m * k * ab + rows_m * n * ab);
    return make_op(name, true, flops, bytes, gemm_flops_, bandwidth_);
  };
  size_t k = 0;
  cost.ops[k++] = gemm("qkv_proj", T, h, qd + 2 * kvd, L);  // fused QKV, column-parallel
  cost.ops[k++] = gemm("o_proj", T, qd, h, L);              // row-parallel
  cost.ops[k++] = gemm("mlp_gate_up", T, h, 2 * I, L);      // fused gate+up, column-parallel
  cost.ops[k++] = gemm("mlp_down", T, I, h, L);             // row-parallel
  OpCost lm = rows > 0 ? gemm("lm_head", rows, h, V, 1) : make_op("lm_head", true, 0, 0, 1, 1);
  lm.bytes += rows * V * 4;  // fp32 logits written for the sampler
  lm.memory_s = lm.bytes / bandwidth_;
  cost.ops[k++] = lm;
  cost.ops[k++] = make_op("attn_prefill", false, prefill_flops, prefill_bytes, attn_flops_, bandwidth_);
  cost.ops[k++] = make_op("attn_decode", false, decode_flops, decode_bytes, attn_flops_, bandwidth_);
  // Memory-bound glue, per layer: two fused add+RMSNorms (read x and residual,
  // write both: 4h) and SwiGLU (read gate and up, write one: 3I); plus the
  // embedding rows gathered and the final norm.
  const double glue_bytes = L * T * ab * (8 * h + 3 * I) + T * h * (wb + 2 * ab);
  cost.ops[k++] = make_op("elementwise", false, 0, glue_bytes, gemm_flops_, bandwidth_);

  for (const OpCost& o : cost.ops) {
    cost.compute_s += o.compute_s;
    cost.memory_s += o.memory_s;
    cost.roofline_s += o.time_s();
  }
  if (tp_ > 1) {
    // Two all-reduces of the T x h activations per layer (after o_proj and
    // mlp_down), one after the vocab-parallel embedding, and the logits gathered
    // to the sampling rank. Not overlapped with compute, as in vLLM.
    const double act = T * h * ab;
    cost.comm_s = (2 * L + 1) * all_reduce_s(act);
    if (rows > 0)
      cost.comm_s += (tp_ - 1.0) / tp_ * rows * model_.vocab_size * 4.0 / hw_.achieved_link_bandwidth() +
                     hw_.link_latency_s;
  }
  cost.overhead_s = hw_.step_overhead_s;
  cost.total_s = cost.roofline_s + cost.comm_s + cost.overhead_s;
  return cost;
}

DecodeCrossover RooflineCostModel::decode_crossover(int context) const {
  const StepCost one = breakdown(decode_shape(1, context));
  const StepCost two = breakdown(decode_shape(2, context));
  DecodeCrossover x;
  x.context = context;
  x.dense_batch = crossing(one.dense_compute_s(), two.dense_compute_s(), one.dense_memory_s(), two.dense_memory_s());
  x.step_batch = crossing(one.compute_s, two.compute_s, one.memory_s, two.memory_s);
  return x;
}

DecodeCrossover decode_crossover(const HardwareSpec& hardware, const ModelConfig& model, int tensor_parallel,
                                 int context) {
  return RooflineCostModel(hardware, model, tensor_parallel).decode_crossover(context);
}

int kv_blocks_from_memory(const HardwareSpec& hw, const ModelConfig& model, int block_size, double fraction,
                          int tensor_parallel) {
  require(block_size >= 1, "cache.block_size", "must be >= 1");
  require(std::isfinite(fraction) && fraction > 0 && fraction <= 1, "cache.gpu_memory_fraction", "must be in (0, 1]");
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double weights = weight_bytes_per_gpu(model, tensor_parallel);
  const double budget = hw.memory_bytes() * fraction - hw.reserve_gib * gib;
  const double per_block = block_size * kv_bytes_per_token_per_gpu(model, tensor_parallel);
  const double blocks = std::floor((budget - weights) / per_block);
  if (blocks < 1) {
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "no room left for KV: %.3g x %.1f GiB of %s minus a %.1f GiB reserve is %.1f GiB per GPU, "
                  "but the weights of %s at tensor_parallel %d take %.1f GiB per GPU (raise the fraction or "
                  "tensor_parallel)",
                  fraction, hw.memory_gib, hw.name.c_str(), hw.reserve_gib,
                  budget / gib, model.name.c_str(), tensor_parallel, weights / gib);
    throw ConfigError(std::string("cache.gpu_memory_fraction: ") + msg);
  }
  return blocks > INT_MAX ? INT_MAX : static_cast<int>(blocks);
}

namespace {

TESTBED_REGISTER(CostModelRegistry, "roofline", [](const CostModelConfig& c, const ModelConfig& model) {
  require(!c.hardware.empty(), "cost_model.hardware",
          "the roofline cost model needs a hardware spec .ini (see experiments/hardware/)");
  require(std::filesystem::is_regular_file(c.hardware), "cost_model.hardware", "cannot open '" + c.hardware + "'");
  return std::make_unique<RooflineCostModel>(HardwareSpec::from_ini_file(c.hardware), model, c.tensor_parallel);
});

}  // namespace
}  // namespace testbed
