// The roofline cost model's op-by-op FLOP and byte counts and the decode
// crossover; formulas in sim/roofline_cost_model.h.
#include "sim/roofline_cost_model.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "engine/common/config_error.h"
#include "sim/memory_planner.h"

namespace testbed {
namespace {

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

RooflineCostModel::RooflineCostModel(HardwareSpec hardware, ModelConfig model, int tensor_parallel,
                                     int expert_parallel)
    : hw_(std::move(hardware)), model_(std::move(model)), tp_(tensor_parallel), ep_(expert_parallel) {
  static std::atomic<uint64_t> next_memo_id{1};
  memo_id_ = next_memo_id.fetch_add(1);
  hw_.validate();
  check_tp_split(model_, tp_);
  require(ep_ >= 1 && tp_ % ep_ == 0, "cost_model.expert_parallel",
          std::to_string(ep_) + " must be >= 1 and divide cost_model.tensor_parallel (" + std::to_string(tp_) + ")");
  require(ep_ == 1 || model_.moe.enabled(), "cost_model.expert_parallel",
          model_.name + " has no experts (expert parallelism applies to mixture-of-experts models)");
  require(ep_ == 1 || model_.moe.num_experts % ep_ == 0, "cost_model.expert_parallel",
          std::to_string(ep_) + " does not divide the " + std::to_string(model_.moe.num_experts) + " experts of " +
              model_.name);
  require(tp_ == 1 || hw_.link_gbps > 0, "interconnect.bandwidth_gbps",
          "must be positive for tensor_parallel > 1 (" + hw_.origin + ")");
  gemm_flops_ = hw_.matmul_flops(model_.gemm_dtype());
  w4a16_ = model_.precision == "w4a16";
  dequant_ops_ = hw_.fp32_tflops > 0 ? hw_.fp32_tflops * 1e12 : hw_.bf16_tflops * 1e12 / 16;
  lm_flops_ = model_.precision.empty() ? gemm_flops_ : hw_.matmul_flops(model_.dtype_bytes() >= 2 ? model_.torch_dtype : "bfloat16");
  attn_flops_ = hw_.attention_flops(model_.torch_dtype);
  bandwidth_ = hw_.achieved_bandwidth();
  kv_bandwidth_ = hw_.achieved_kv_bandwidth();
  // What every step reads of the model, once: the lookups behind these
  // (dtype names, precision strings) were a tenth of a simulated step.
  split_ = tp_split(model_, tp_);
  weight_bytes_ = model_.linear_weight_bytes();
  act_bytes_ = activation_bytes(model_);
  lm_weight_bytes_ = model_.other_weight_bytes();
  dense_layers_ = model_.num_dense_mlp_layers();
  moe_layers_ = model_.num_moe_layers();
  const MoeConfig& moe = model_.moe;
  moe_width_ = (static_cast<double>(moe.experts_per_token) * moe.expert_intermediate +
                static_cast<double>(moe.num_shared_experts) * moe.shared_intermediate) / tp_;
}

double RooflineCostModel::all_reduce_s(double bytes) const {
  // Ring all-reduce: each GPU sends and receives 2 (TP-1)/TP of the buffer
  // (Patarasuk & Yuan, JPDC 2009); the latency term covers the small messages
  // of decode. A measured table for this TP degree replaces both terms.
  return hw_.all_reduce_s(tp_, bytes);
}

RooflineCostModel::AttentionSums RooflineCostModel::attention_sums(const StepShape& shape) const {
  const TpSplit& s = split_;
  const double L = s.layers, d = s.head_dim;
  const double qd = s.q_heads * d, kvd = s.kv_heads * d;
  const double ab = act_bytes_;
  // The per-sequence terms' constant factors, taken out as the expressions
  // group them (left to right), so every value is the same bit for bit; and
  // sums in locals. Summed into the returned struct, each store could alias
  // the model's fields and reload them (36 instructions a sequence, 7 of
  // them this one product).
  const double flops_k = L * 4 * s.q_heads * d, kv_k = 2 * kvd;
  double tokens = 0, rows = 0, prefill_flops = 0, prefill_bytes = 0, decode_flops = 0, decode_bytes = 0;
  for (const SeqShape& q : shape) {
    const double n = q.num_new, c = q.num_computed;
    tokens += n;
    rows += q.num_logit_rows();
    // Causal attention: token i of the chunk sees c + i + 1 keys; QK^T and PV are
    // 2 FLOPs per multiply-add each, so 4 * d per (query, key) pair per head.
    const double flops = flops_k * n * (c + (n + 1) / 2);
    // The whole K/V context (new tokens included) read once per KV head, since
    // GQA kernels share it across the query group; Q in, O out.
    const double bytes = L * (kv_k * (c + n) * ab + 2 * n * qd * ab);
    (q.is_decode ? decode_flops : prefill_flops) += flops;
    (q.is_decode ? decode_bytes : prefill_bytes) += bytes;
  }
  return AttentionSums{tokens, rows, prefill_flops, prefill_bytes, decode_flops, decode_bytes};
}

double RooflineCostModel::fill_dense_ops(double T, double rows, StepCost& cost) const {
  const TpSplit& s = split_;
  const double L = s.layers, h = s.hidden, d = s.head_dim, I = s.inter, V = s.vocab;
  const double qd = s.q_heads * d, kvd = s.kv_heads * d;
  const double wb = weight_bytes_, ab = act_bytes_;
  // A GEMM of T rows against a K x N weight: 2TKN FLOPs; weight read once, input read, output written.
  auto gemm = [&](const char* name, double rows_m, double k, double n, double repeat) {
    const double flops = repeat * 2 * rows_m * k * n;
    const double bytes = repeat * (k * n * wb + rows_m * k * ab + rows_m * n * ab);
    OpCost op = make_op(name, true, flops, bytes, gemm_flops_, bandwidth_);
    op.compute_s += repeat * dequant_s(rows_m, k * n);
    return op;
  };
  cost.ops[0] = gemm("qkv_proj", T, h, qd + 2 * kvd, L);  // fused QKV, column-parallel
  cost.ops[1] = gemm("o_proj", T, qd, h, L);              // row-parallel
  const double Ld = dense_layers_, Lm = moe_layers_;
  OpCost gate_up = gemm("mlp_gate_up", T, h, 2 * I, Ld);  // fused gate+up, column-parallel
  OpCost down = gemm("mlp_down", T, I, h, Ld);            // row-parallel
  if (Lm > 0) add_experts(T, Lm, gate_up, down);
  cost.ops[2] = gate_up;
  cost.ops[3] = down;
  // The LM head keeps 16-bit weights and runs at the 16-bit peak whatever model.precision is.
  OpCost lm = rows > 0 ? make_op("lm_head", true, 2 * rows * h * V,
                                 h * V * lm_weight_bytes_ + rows * h * ab + rows * V * ab, lm_flops_,
                                 bandwidth_)
                       : make_op("lm_head", true, 0, 0, 1, 1);
  lm.bytes += rows * V * 4;  // fp32 logits written for the sampler
  lm.memory_s = lm.bytes / bandwidth_;
  cost.ops[4] = lm;
  // Memory-bound glue, per layer: two fused add+RMSNorms (read x and residual,
  // write both: 4h) and SwiGLU (read gate and up, write one: 3I); plus the
  // embedding rows gathered and the final norm.
  const double glue_bytes =
      L * T * ab * 8 * h + T * ab * 3 * (Ld * I + Lm * moe_width_) + T * h * (wb + 2 * ab);
  cost.ops[7] = make_op("elementwise", false, 0, glue_bytes, gemm_flops_, bandwidth_);
  if (tp_ == 1) return 0;
  // Two all-reduces of the T x h activations per layer (after o_proj and
  // mlp_down), one after the vocab-parallel embedding, and the logits gathered
  // to the sampling rank. Not overlapped with compute, as in vLLM.
  const double act = T * h * ab;
  double comm_s = (2 * L + 1) * all_reduce_s(act);
  if (rows > 0)
    comm_s += (tp_ - 1.0) / tp_ * rows * model_.vocab_size * 4.0 / hw_.achieved_link_bandwidth() + hw_.link_latency_s;
  return comm_s;
}

void RooflineCostModel::fill_attention_ops(const AttentionSums& a, StepCost& cost) const {
  cost.ops[5] = make_op("attn_prefill", false, a.prefill_flops, a.prefill_bytes, attn_flops_, kv_bandwidth_);
  cost.ops[6] = make_op("attn_decode", false, a.decode_flops, a.decode_bytes, attn_flops_, kv_bandwidth_);
}

StepCost RooflineCostModel::breakdown(const StepShape& shape) const {
  StepCost cost;
  if (shape.empty()) return cost;
  const AttentionSums a = attention_sums(shape);
  cost.comm_s = fill_dense_ops(a.tokens, a.rows, cost);
  fill_attention_ops(a, cost);
  for (const OpCost& o : cost.ops) {
    cost.compute_s += o.compute_s;
    cost.memory_s += o.memory_s;
    cost.roofline_s += o.is_dense ? hw_.combine(o.compute_s, o.memory_s) : o.time_s();
  }
  cost.overhead_s = hw_.step_overhead_s + split_.layers * hw_.layer_overhead_s;
  cost.total_s = cost.roofline_s + cost.comm_s + cost.overhead_s;
  return cost;
}

RooflineCostModel::DenseTerms RooflineCostModel::dense_terms(double tokens, double rows) const {
  StepCost cost;
  DenseTerms t;
  t.comm_s = fill_dense_ops(tokens, rows, cost);
  for (int i = 0; i < 5; ++i) t.dense_s += hw_.combine(cost.ops[i].compute_s, cost.ops[i].memory_s);
  t.elementwise_s = cost.ops[7].time_s();
  return t;
}

double RooflineCostModel::predict(const StepShape& shape) const {
  if (shape.empty()) return 0;
  const AttentionSums a = attention_sums(shape);
  // Most steps of a run repeat a few (tokens, rows) pairs (a decode step of
  // k sequences is (k, k)). The memo is per thread, so instances stepped on
  // several threads (fleet.threads) share no state, and keyed by memo_id_.
  struct Entry {
    uint64_t id = 0;  // 0: empty (ids start at 1)
    double tokens = 0, rows = 0;
    DenseTerms terms;
  };
  static thread_local Entry memo[256];
  const uint64_t key = (static_cast<uint64_t>(a.tokens) << 32) ^ static_cast<uint64_t>(a.rows);
  Entry& e = memo[(key * 0x9E3779B97F4A7C15ull) >> 56];
  if (e.id != memo_id_ || e.tokens != a.tokens || e.rows != a.rows) {
    e.terms = dense_terms(a.tokens, a.rows);
    e.id = memo_id_;
    e.tokens = a.tokens;
    e.rows = a.rows;
  }
  StepCost attention;
  fill_attention_ops(a, attention);
  // The same additions, in the same order, as breakdown's.
  double roofline_s = e.terms.dense_s;
  roofline_s += attention.ops[5].time_s();
  roofline_s += attention.ops[6].time_s();
  roofline_s += e.terms.elementwise_s;
  const double overhead_s = hw_.step_overhead_s + split_.layers * hw_.layer_overhead_s;
  return roofline_s + e.terms.comm_s + overhead_s;
}

double RooflineCostModel::dequant_s(double rows, double weights) const {
  if (!w4a16_ || rows <= 0) return 0;
  // Marlin-style kernels unpack, shift by the zero point and scale each weight
  // in registers (about 4 ALU operations) once per tile of up to 64 rows.
  return weights * std::ceil(rows / 64) * 4 / dequant_ops_;
}

double RooflineCostModel::experts_touched(double tokens) const {
  const double E = model_.moe.num_experts, k = model_.moe.experts_per_token;
  if (E <= 0 || tokens <= 0) return 0;
  return E * (1.0 - std::pow(1.0 - k / E, tokens));
}

namespace {

// The expected largest of n independent standard normals (n = 1, 2, 4, ... 64;
// beyond, sqrt(2 ln n)).
double expected_max_normal(int n) {
  static const double table[] = {0.0, 0.5642, 1.0294, 1.4236, 1.7660, 2.0697, 2.3327};  // n = 2^i
  int i = 0;
  while ((1 << i) < n && i < 6) ++i;
  return (1 << i) == n ? table[i] : std::sqrt(2.0 * std::log(static_cast<double>(n)));
}

// `width` columns rounded up to whole GEMM tiles (0: no rounding).
double tiled(double width, double tile) { return tile > 0 ? std::ceil(width / tile - 1e-9) * tile : width; }

}  // namespace

double RooflineCostModel::busiest_group_pairs(double tokens) const {
  const double pairs = tokens * model_.moe.experts_per_token;
  if (ep_ <= 1) return pairs;
  // Each token-expert pair lands on one of ep_ expert groups, uniformly: the
  // busiest group gets the mean plus about E[max of ep_ normals] deviations.
  const double p = 1.0 / ep_, mean = pairs * p, sd = std::sqrt(pairs * p * (1 - p));
  return std::min(pairs, mean + expected_max_normal(ep_) * sd);
}

void RooflineCostModel::add_experts(double T, double layers, OpCost& gate_up, OpCost& down) const {
  const MoeConfig& m = model_.moe;
  const double h = model_.hidden_size, E = m.num_experts, Ie = m.expert_intermediate;
  const double wb = weight_bytes_, ab = act_bytes_, tp = tp_, ep = ep_;
  const double touched = experts_touched(T);
  // Routed experts over ep expert groups of tp / ep GPUs each (ep = 1: every
  // expert split TP ways): a GPU holds E / ep experts, each split tp / ep ways.
  // The step waits for the busiest group, whose pairs the GPU computes over
  // its slice of each expert, rounded up to whole GEMM tiles (thin slices
  // waste tiles); it reads the weights of its group's touched experts.
  const double split = tp / ep, slice = Ie / split, pairs = busiest_group_pairs(T);
  const double tile = hw_.gemm_tile_n;
  double up_flops = 2 * pairs * h * tiled(2 * slice, tile);
  double up_bytes = touched / ep * h * 2 * slice * wb + T * h * ab + pairs * 2 * slice * ab;
  double down_flops = 2 * pairs * slice * tiled(h, tile);
  double down_bytes = touched / ep * slice * h * wb + pairs * slice * ab + pairs * h * ab;
  // The router (replicated): a T x E GEMM and its fp32 scores.
  up_flops += 2 * T * h * E;
  up_bytes += h * E * wb + T * E * 4;
  // Shared experts: every token, like a dense MLP of their total width.
  const double S = static_cast<double>(m.num_shared_experts) * m.shared_intermediate / tp;
  if (S > 0) {
    up_flops += 2 * T * h * 2 * S;
    up_bytes += h * 2 * S * wb + T * 2 * S * ab;
    down_flops += 2 * T * S * h;
    down_bytes += S * h * wb + T * S * ab;
  }
  // W4A16: each touched expert's slice is dequantized once per 64 of its pairs;
  // the dense layers' dequantization is already in the ops' compute time.
  double up_dequant = gate_up.compute_s - gate_up.flops / gemm_flops_;
  double down_dequant = down.compute_s - down.flops / gemm_flops_;
  if (w4a16_ && touched > 0) {
    const double experts = touched / ep, per_expert = pairs / std::max(1.0, experts);
    up_dequant += layers * experts * dequant_s(per_expert, h * 2 * slice);
    down_dequant += layers * experts * dequant_s(per_expert, slice * h);
  }
  gate_up.flops += layers * up_flops;
  gate_up.bytes += layers * up_bytes;
  down.flops += layers * down_flops;
  down.bytes += layers * down_bytes;
  for (OpCost* o : {&gate_up, &down}) {
    o->compute_s = o->flops / gemm_flops_;
    o->memory_s = o->bytes / bandwidth_;
  }
  gate_up.compute_s += up_dequant;
  down.compute_s += down_dequant;
}

DecodeCrossover RooflineCostModel::decode_crossover(int context) const {
  const StepCost one = breakdown(decode_shape(1, context));
  const StepCost two = breakdown(decode_shape(2, context));
  DecodeCrossover x;
  x.context = context;
  x.dense_batch = crossing(one.dense_compute_s(), two.dense_compute_s(), one.dense_memory_s(), two.dense_memory_s());
  x.step_batch = crossing(one.compute_s, two.compute_s, one.memory_s, two.memory_s);
  if (model_.moe.enabled() || w4a16_) {
    // The experts' weight bytes grow with the batch until every expert is
    // touched, and W4A16's dequantization steps every 64 rows, so the terms
    // are not linear in B: bisect on B instead.
    auto first_compute_bound = [&](bool dense_only) {
      auto excess = [&](double b) {
        const StepCost c = breakdown(decode_shape(static_cast<int>(b), context));
        return dense_only ? c.dense_compute_s() - c.dense_memory_s() : c.compute_s - c.memory_s;
      };
      double lo = 1, hi = 1 << 16;
      if (excess(lo) >= 0) return lo;
      if (excess(hi) < 0) return std::numeric_limits<double>::infinity();
      while (hi - lo > 1) {
        const double mid = std::floor(0.5 * (lo + hi));
        (excess(mid) < 0 ? lo : hi) = mid;
      }
      return hi;  // the smallest batch (an integer) at which compute time reaches memory time
    };
    x.dense_batch = first_compute_bound(true);
    x.step_batch = first_compute_bound(false);
  }
  return x;
}

DecodeCrossover decode_crossover(const HardwareSpec& hardware, const ModelConfig& model, int tensor_parallel,
                                 int context) {
  return RooflineCostModel(hardware, model, tensor_parallel).decode_crossover(context);
}

namespace {

TESTBED_REGISTER(CostModelRegistry, "roofline", [](const CostModelSetup& s) {
  require(!s.hardware.empty(), "cost_model.hardware",
          "the roofline cost model needs a hardware spec .ini (see experiments/hardware/)");
  require(std::filesystem::is_regular_file(s.hardware), "cost_model.hardware", "cannot open '" + s.hardware + "'");
  return std::make_unique<RooflineCostModel>(HardwareSpec::from_ini_file(s.hardware), s.model, s.tensor_parallel,
                                             s.expert_parallel);
});

}  // namespace
}  // namespace testbed
