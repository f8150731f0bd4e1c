// The roofline cost model against numbers worked out by hand: small-batch decode
// is weight bytes over bandwidth, long prefill is compute-bound, the decode
// crossover is where the two terms meet, KV capacity for Llama-3.1-8B on H100,
// tensor parallelism, and hardware spec errors that name the key.
//   ./build/tests/test_sim "[roofline]"   (from the repository root)
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <filesystem>
#include <fstream>

#include "engine/common/config_error.h"
#include "engine/common/rng.h"
#include "sim/cost_model.h"
#include "sim/memory_planner.h"
#include "sim/roofline_cost_model.h"
#include "support/scratch.h"

namespace fs = std::filesystem;
using namespace testbed;

namespace {

const char* kH100 = "experiments/hardware/h100-sxm.ini";
const double kGiB = 1024.0 * 1024.0 * 1024.0;

ModelConfig model(const std::string& name) { return ModelConfig::from_json_file("experiments/models/" + name + ".json"); }

HardwareSpec h100_without_overhead() {
  HardwareSpec hw = HardwareSpec::from_ini_file(kH100);
  hw.step_overhead_s = 0;
  return hw;
}

fs::path scratch_file(const std::string& name, const std::string& text) {
  const fs::path dir = testbed_test::scratch_root("testbed_roofline");
  std::ofstream(dir / name) << text;
  return dir / name;
}

// The message of the ConfigError `fn` throws ("" if none).
template <class Fn>
std::string config_error(Fn fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

const char* kMinimalSpec =
    "[device]\nname = test-gpu\n"
    "[compute]\nbf16_tflops = 1000\nefficiency = 1\n"
    "[memory]\ncapacity_gib = 80\nbandwidth_gbps = 2000\nefficiency = 1\n"
    "[step]\noverhead_s = 0\n";

// Runs the built CLI; returns (exit status, stdout + stderr).
std::pair<int, std::string> run_cli(const std::string& args) {
  const std::string cmd = std::string(TESTBED_BINARY_DIR) + "/testbed " + args + " 2>&1";
  std::string output;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int raw = pclose(p);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, output};
}

}  // namespace

TEST_CASE("roofline small-batch decode is weight bytes over bandwidth", "[roofline]") {
  const ModelConfig m = model("llama-3.1-8b");
  const RooflineCostModel cost(h100_without_overhead(), m, 1);
  const StepCost step = cost.breakdown(decode_shape(1, 16));
  // Every weight but the embedding table (only T rows of it are gathered) is read once.
  const double weights_read = (static_cast<double>(m.num_params()) - double(m.vocab_size) * m.hidden_size) * 2;
  const double bandwidth = 3350e9 * 0.9;  // h100-sxm.ini: memory.bandwidth_gbps x memory.efficiency
  CHECK(step.total_s == Approx(weights_read / bandwidth).epsilon(0.02));
  CHECK(step.total_s == Approx(m.num_params() * 2.0 / bandwidth).epsilon(0.08));
  CHECK(step.compute_s < 0.01 * step.memory_s);
  for (const OpCost& op : step.ops) CHECK_FALSE(op.is_compute_bound());

  // The same through the registry, from a test-only spec file with no overhead.
  const fs::path spec = scratch_file("gpu.ini", kMinimalSpec);
  CostModelConfig config;
  config.kind.name = "roofline";
  config.hardware = spec.string();
  const auto registered = make_cost_model(config, m);
  CHECK(registered->name() == "roofline");
  const auto* roofline = dynamic_cast<const RooflineCostModel*>(registered.get());
  REQUIRE(roofline != nullptr);
  CHECK(roofline->predict(decode_shape(1, 16)) == Approx(weights_read / 2000e9).epsilon(0.02));
}

TEST_CASE("roofline long prefill is compute-bound", "[roofline]") {
  const ModelConfig m = model("llama-3.1-8b");
  const RooflineCostModel cost(h100_without_overhead(), m, 1);
  const StepCost step = cost.breakdown(prefill_shape(8192));
  CHECK(step.compute_s > 5 * step.memory_s);
  for (const char* op : {"qkv_proj", "o_proj", "mlp_gate_up", "mlp_down", "attn_prefill"})
    CHECK(step.op(op).is_compute_bound());
  // By hand: 2 FLOPs per parameter per token at 0.8 x 989.4 TFLOP/s, plus causal
  // attention 4 * 32 heads * 128 * 8192 * 4096.5 * 32 layers at 0.6 x 989.4.
  const double gemm = 2.0 * 6.979584e9 * 8192 / (0.8 * 989.4e12);
  const double attention = 4.0 * 32 * 128 * 8192 * 4096.5 * 32 / (0.6 * 989.4e12);
  CHECK(step.dense_compute_s() == Approx(gemm).epsilon(0.01));
  CHECK(step.op("attn_prefill").compute_s == Approx(attention).epsilon(1e-6));
  // Norms, residual adds and SwiGLU stream ~40 GB of activations: memory-bound but small.
  CHECK_FALSE(step.op("elementwise").is_compute_bound());
  CHECK(step.total_s > gemm + attention);
  CHECK(step.total_s < 1.12 * (gemm + attention));
  // A chunk after a long cached context attends to all of it: quadratic growth.
  const double later = cost.breakdown(prefill_shape(8192, 8192)).op("attn_prefill").compute_s;
  CHECK(later == Approx(attention * (8192 + 4096.5) / 4096.5).epsilon(1e-6));
}

TEST_CASE("roofline decode crossover is where compute meets memory", "[roofline]") {
  const ModelConfig m = model("llama-3.1-8b");
  const RooflineCostModel cost(h100_without_overhead(), m, 1);
  const DecodeCrossover x = cost.decode_crossover(0);
  REQUIRE(std::isfinite(x.dense_batch));
  // Near the ridge point in FLOPs per weight byte (2 FLOPs per 2-byte weight per row),
  // pushed up a little by activation traffic.
  const double ridge = 0.8 * 989.4e12 / (0.9 * 3350e9);
  CHECK(x.dense_batch > ridge);
  CHECK(x.dense_batch < 1.25 * ridge);

  const int below = static_cast<int>(std::floor(x.dense_batch));
  const int above = below + 1;
  const StepCost lo = cost.breakdown(decode_shape(below, 0));
  const StepCost hi = cost.breakdown(decode_shape(above, 0));
  CHECK(lo.dense_memory_s() > lo.dense_compute_s());
  CHECK(hi.dense_compute_s() > hi.dense_memory_s());
  CHECK(hi.dense_compute_s() == Approx(hi.dense_memory_s()).epsilon(0.01));
  const StepCost half = cost.breakdown(decode_shape(below / 2, 0));
  const StepCost twice = cost.breakdown(decode_shape(2 * above, 0));
  CHECK(half.dense_memory_s() > 1.5 * half.dense_compute_s());
  CHECK(twice.dense_compute_s() > 1.5 * twice.dense_memory_s());

  // Whole step: attention K/V reads only add memory, so the crossover moves up;
  // at 1024 tokens of context a GQA-4 model never turns compute-bound.
  CHECK(x.step_batch > x.dense_batch);
  CHECK(std::isinf(cost.decode_crossover(1024).step_batch));
  CHECK(cost.decode_crossover(1024).dense_batch == Approx(x.dense_batch));
  // Same answer from the free function.
  CHECK(decode_crossover(h100_without_overhead(), m, 1, 0).dense_batch == Approx(x.dense_batch));
}

TEST_CASE("roofline KV capacity for Llama-3.1-8B on H100", "[roofline]") {
  const ModelConfig m = model("llama-3.1-8b");
  const HardwareSpec hw = HardwareSpec::from_ini_file(kH100);
  // By hand: 32 layers x (4096*6144 QKV + 4096*4096 O + 3*4096*14336 MLP + 2*4096 norms)
  // + 2 x 128256*4096 (embedding, LM head) + 4096 = 8,030,261,248 parameters of 2 bytes;
  // K and V: 2 x 32 layers x 8 heads x 128 x 2 bytes = 131,072 bytes per token.
  REQUIRE(m.num_params() == 8030261248LL);
  CHECK(weight_bytes_per_gpu(m, 1) == 2.0 * 8030261248LL);
  CHECK(kv_bytes_per_token_per_gpu(m, 1) == 131072.0);
  const double free_bytes = (79.65 * 0.9 - 2.0) * kGiB - 2.0 * 8030261248LL;
  const int expected = static_cast<int>(std::floor(free_bytes / (16 * 131072.0)));
  const int blocks = kv_blocks_from_memory(hw, m, 16, 0.9, 1);
  CHECK(blocks == expected);
  // ~54.7 GiB of KV: about 448K tokens, the order vLLM reports for this model and GPU.
  CHECK(blocks > 25000);
  CHECK(blocks < 32000);
  CHECK(kv_blocks_from_memory(hw, m, 32, 0.9, 1) == blocks / 2);

  // Llama-3.1-70B (141 GB of bf16 weights) cannot fit on one 80 GB GPU; on four it can.
  const ModelConfig big = model("llama-3.1-70b");
  const std::string error = config_error([&] { kv_blocks_from_memory(hw, big, 16, 0.9, 1); });
  CHECK(error.find("cache.gpu_memory_fraction") != std::string::npos);
  CHECK(kv_blocks_from_memory(hw, big, 16, 0.9, 4) > 10000);
  CHECK(config_error([&] { kv_blocks_from_memory(hw, m, 0, 0.9, 1); }).find("cache.block_size") == 0);
  CHECK(config_error([&] { kv_blocks_from_memory(hw, m, 16, 1.5, 1); }).find("cache.gpu_memory_fraction") == 0);
}

TEST_CASE("roofline tensor parallelism halves weight time and adds communication", "[roofline]") {
  const ModelConfig m = model("llama-3.1-8b");
  const RooflineCostModel tp1(h100_without_overhead(), m, 1);
  const RooflineCostModel tp2(h100_without_overhead(), m, 2);
  const StepCost one = tp1.breakdown(decode_shape(1, 16));
  const StepCost two = tp2.breakdown(decode_shape(1, 16));
  CHECK(two.memory_s == Approx(one.memory_s / 2).epsilon(0.02));
  CHECK(two.dense_memory_s() == Approx(one.dense_memory_s() / 2).epsilon(0.01));
  CHECK(one.comm_s == 0);
  // 2 all-reduces per layer + the embedding's, each at least the 10 us latency, + the logits gather.
  CHECK(two.comm_s > (2 * 32 + 1) * 10e-6);
  CHECK(two.comm_s < (2 * 32 + 2) * 12e-6);
  CHECK(two.total_s < one.total_s);
  CHECK(weight_bytes_per_gpu(m, 2) == Approx(weight_bytes_per_gpu(m, 1) / 2).epsilon(1e-4));
  // Past the 8 KV heads, K/V heads are replicated: TP=16 stores one per GPU, like TP=8.
  const ModelConfig big = model("llama-3.1-70b");
  CHECK(kv_bytes_per_token_per_gpu(big, 16) == kv_bytes_per_token_per_gpu(big, 8));
  // Heads must split evenly.
  const std::string error = config_error([&] { (void)RooflineCostModel(h100_without_overhead(), m, 3); });
  CHECK(error.find("cost_model.tensor_parallel") == 0);
}

TEST_CASE("roofline predicts a scheduler Batch like its shape", "[roofline]") {
  const ModelConfig m = model("llama-3.1-8b");
  const RooflineCostModel cost(HardwareSpec::from_ini_file(kH100), m, 1);
  Request prompt_request;
  prompt_request.prompt.assign(100, 7);
  Sequence prefilling(prompt_request);
  Request decode_request;
  decode_request.prompt.assign(50, 3);
  Sequence decoding(decode_request);
  decoding.append_token(5);
  Batch batch;
  batch.add(&prefilling, 0, 60);  // first chunk: no sample
  batch.add(&decoding, 50, 1);
  const StepShape shape = step_shape_of(batch);
  REQUIRE(shape.size() == 2);
  CHECK_FALSE(shape[0].samples);
  CHECK_FALSE(shape[0].is_decode);
  CHECK(shape[1].samples);
  CHECK(shape[1].is_decode);
  CHECK(cost.predict(shape) == cost.predict({{0, 60, false, false}, {50, 1, true, true}}));
  CHECK(cost.breakdown(shape).op("lm_head").flops == Approx(2.0 * 4096 * 128256));
  CHECK(cost.predict({}) == 0);
  CHECK(cost.breakdown(decode_shape(1, 0)).overhead_s == 0.002);
}

TEST_CASE("roofline hardware spec errors name the key", "[roofline]") {
  auto error_for = [](const std::string& text) {
    return config_error([&] { HardwareSpec::from_ini_text(text, "bad.ini"); });
  };
  const std::string unknown = error_for(std::string(kMinimalSpec) + "[compute]\nbf17_tflops = 3\n");
  CHECK(unknown.find("bad.ini") == 0);
  CHECK(unknown.find("compute.bf17_tflops") != std::string::npos);
  const std::string bad_value = error_for(
      "[compute]\nbf16_tflops = 1000\n[memory]\ncapacity_gib = 80\nbandwidth_gbps = 2 TB/s\n");
  CHECK(bad_value.find("memory.bandwidth_gbps") != std::string::npos);
  const std::string missing = error_for("[memory]\ncapacity_gib = 80\nbandwidth_gbps = 2000\n");
  CHECK(missing.find("compute.bf16_tflops") != std::string::npos);
  const std::string out_of_range = error_for(std::string(kMinimalSpec) + "[interconnect]\nefficiency = 1.5\n");
  CHECK(out_of_range == "bad.ini: interconnect.efficiency: must be in (0, 1]");
  CHECK(config_error([] { HardwareSpec::from_ini_file("no/such/gpu.ini"); }).find("no/such/gpu.ini") == 0);

  // The device lacks the model's dtype; tensor parallelism without a link.
  HardwareSpec hw = HardwareSpec::from_ini_text(kMinimalSpec, "gpu.ini");
  CHECK(config_error([&] { (void)RooflineCostModel(hw, model("tiny"), 1); }).find("compute.fp32_tflops") == 0);
  CHECK(config_error([&] { (void)RooflineCostModel(hw, model("llama-3.1-8b"), 2); }).find("interconnect.bandwidth_gbps") ==
        0);
  CostModelConfig config;
  config.kind.name = "roofline";
  config.hardware = "no/such/gpu.ini";
  CHECK(config_error([&] { make_cost_model(config, model("tiny")); }).find("cost_model.hardware") == 0);
  config.hardware = "";
  CHECK(config_error([&] { make_cost_model(config, model("tiny")); }).find("cost_model.hardware") == 0);
}

TEST_CASE("roofline shipped hardware specs parse", "[roofline]") {
  const HardwareSpec h100 = HardwareSpec::from_ini_file(kH100);
  const HardwareSpec h200 = HardwareSpec::from_ini_file("experiments/hardware/h200.ini");
  const HardwareSpec a100 = HardwareSpec::from_ini_file("experiments/hardware/a100-80gb.ini");
  CHECK(h100.bf16_tflops == 989.4);
  CHECK(h200.bf16_tflops == h100.bf16_tflops);
  CHECK(h200.bandwidth_gbps == 4800);
  CHECK(a100.bf16_tflops == 312);
  CHECK(h100.link_latency_s == 10e-6);
  // Ampere has no FP8 tensor cores: FP8 checkpoints are costed at the BF16 peak.
  CHECK(a100.matmul_flops("float8_e4m3fn") == a100.matmul_flops("bfloat16"));
  CHECK(h100.matmul_flops("float8_e4m3fn") == Approx(2 * h100.matmul_flops("bfloat16")).epsilon(1e-3));
  // Same model, same batch: the H200's extra bandwidth makes small-batch decode faster.
  const ModelConfig m = model("llama-3.1-8b");
  CHECK(RooflineCostModel(h200, m, 1).predict(decode_shape(8, 512)) <
        RooflineCostModel(h100, m, 1).predict(decode_shape(8, 512)));
}

TEST_CASE("roofline CLI prints the knee and writes the curve", "[roofline]") {
  if (!fs::exists(fs::path(TESTBED_BINARY_DIR) / "testbed")) {
    WARN("build/testbed not built: skipping the CLI checks");
    return;
  }
  const std::string args = "roofline --model experiments/models/llama-3.1-8b.json --hardware " + std::string(kH100);
  const fs::path csv = scratch_file("curve.csv", "");
  const auto [status, output] = run_cli(args + " --context 0 --max-batch 300 --output " + csv.string());
  REQUIRE(status == 0);
  CHECK(output.find("B* = 289.0") != std::string::npos);
  CHECK(output.find("<- knee") != std::string::npos);
  std::ifstream in(csv);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  CHECK(lines == 302);  // comment, header, batch 1..300

  const auto unknown = run_cli(args + " --bogus 1");
  CHECK(unknown.first == 2);
  CHECK(unknown.second.find("--bogus") != std::string::npos);
  const auto missing = run_cli("roofline --model no/such.json --hardware " + std::string(kH100));
  CHECK(missing.first == 2);
  CHECK(missing.second.find("no/such.json") != std::string::npos);
  const auto bad_tp = run_cli(args + " --tp 3");
  CHECK(bad_tp.first == 2);
  CHECK(bad_tp.second.find("--tp") != std::string::npos);
}

TEST_CASE("roofline counts the expert weights a step touches: Mixtral by hand", "[roofline][moe]") {
  const ModelConfig m = model("mixtral-8x7b");
  const RooflineCostModel cost(h100_without_overhead(), m, 1);
  const double h = 4096, I = 14336, L = 32, E = 8, ab = 2, wb = 2;
  // Batch 1: one token picks 2 of 8 experts, so 8 (1 - (1 - 2/8)^1) = 2 experts' weights are read.
  CHECK(cost.experts_touched(1) == Approx(2.0));
  const StepCost one = cost.breakdown(decode_shape(1, 100));
  const double up1 = L * (2 * h * 2 * I * wb + h * ab + 2 * 2 * I * ab + h * E * wb + E * 4);
  const double down1 = L * (2 * I * h * wb + 2 * I * ab + 2 * h * ab);
  CHECK(one.op("mlp_gate_up").bytes == Approx(up1));
  CHECK(one.op("mlp_down").bytes == Approx(down1));
  CHECK(one.op("mlp_gate_up").flops == Approx(L * (2 * 2 * h * 2 * I + 2 * h * E)));
  // 512 tokens touch every expert: all 8 experts' weights, 1024 token-expert pairs.
  const StepCost big = cost.breakdown(decode_shape(512, 100));
  CHECK(cost.experts_touched(512) == Approx(8.0).epsilon(1e-12));
  const double T = 512;
  const double up = L * (8 * h * 2 * I * wb + T * h * ab + T * 2 * 2 * I * ab + h * E * wb + T * E * 4);
  CHECK(big.op("mlp_gate_up").bytes == Approx(up).epsilon(1e-9));
  CHECK(big.op("mlp_gate_up").flops == Approx(L * (2 * T * 2 * h * 2 * I + 2 * T * h * E)));
  // Memory holds all experts: 46.7 B parameters.
  CHECK(weight_bytes_per_gpu(m, 1) == Approx(m.num_params() * 2.0));
  CHECK(weight_bytes_per_gpu(m, 2) == Approx(m.num_params() * 2.0 / 2).epsilon(0.01));
  // The knee: weights are reused by T k / E tokens, so a MoE model turns
  // compute-bound at a batch about E / k times a dense model's.
  const double dense_knee = RooflineCostModel(h100_without_overhead(), model("llama-3.1-8b"), 1).decode_crossover(1024).dense_batch;
  const double knee = cost.decode_crossover(1024).dense_batch;
  CHECK(knee > 3 * dense_knee);
  CHECK(knee < 5 * dense_knee);
  const StepCost at = cost.breakdown(decode_shape(static_cast<int>(knee), 1024));
  CHECK(at.dense_compute_s() >= at.dense_memory_s());
  const StepCost below = cost.breakdown(decode_shape(static_cast<int>(knee) - 1, 1024));
  CHECK(below.dense_compute_s() < below.dense_memory_s());
}

TEST_CASE("roofline expert parallelism: the busiest group's pairs, whole-tile expert slices", "[roofline][moe]") {
  const ModelConfig q = model("qwen3-30b-a3b");  // 128 experts of width 768, top-8
  const HardwareSpec hw = h100_without_overhead();
  const RooflineCostModel tp8(hw, q, 8, 1), ep8(hw, q, 8, 8);
  // Without expert parallelism every GPU works on all T k pairs.
  CHECK(tp8.busiest_group_pairs(100) == Approx(800));
  // With 8 groups a group gets 1/8 of them on average, the busiest about
  // E[max of 8 normals] = 1.4236 standard deviations more.
  const double mean = 100.0, sd = std::sqrt(800 * (1.0 / 8) * (7.0 / 8));
  CHECK(ep8.busiest_group_pairs(100) == Approx(mean + 1.4236 * sd));
  CHECK(ep8.busiest_group_pairs(0.5) <= 4.0);  // never more than all pairs
  // FLOPs of one layer's gate+up at T = 2048: split 8 ways a slice is 96
  // columns of each expert, 192 for gate+up, padded to 256 (two 128-wide
  // tiles); in expert groups a GPU computes its own pairs at full width 1536.
  const double T = 2048, h = 2048, L = 48;
  const double router = 2 * T * h * 128;
  const StepCost a = tp8.breakdown(prefill_shape(2048, 0, false)), b = ep8.breakdown(prefill_shape(2048, 0, false));
  CHECK(a.op("mlp_gate_up").flops == Approx(L * (2 * T * 8 * h * 256 + router)));
  CHECK(b.op("mlp_gate_up").flops == Approx(L * (2 * ep8.busiest_group_pairs(T) * h * 1536 + router)));
  CHECK(b.op("mlp_gate_up").compute_s < a.op("mlp_gate_up").compute_s);  // no wasted tile columns
  // Decode at small batch is memory-bound: the same weight bytes either way.
  const StepCost da = tp8.breakdown(decode_shape(8, 1024)), db = ep8.breakdown(decode_shape(8, 1024));
  CHECK(db.total_s == Approx(da.total_s).epsilon(0.01));
  // Expert parallelism needs experts, and degrees that divide.
  CHECK(config_error([&] { (void)RooflineCostModel(hw, model("llama-3.1-8b"), 2, 2); }).find("cost_model.expert_parallel") == 0);
  CHECK(config_error([&] { (void)RooflineCostModel(hw, q, 4, 8); }).find("cost_model.expert_parallel") == 0);
  CHECK(config_error([&] { (void)RooflineCostModel(hw, model("mixtral-8x7b"), 8, 8); }).empty());
  CostModelConfig linear;
  linear.expert_parallel = 2;
  linear.tensor_parallel = 2;
  CHECK(config_error([&] { linear.validate(); }).find("cost_model.expert_parallel") == 0);
}

TEST_CASE("roofline precisions: fp8 and w4a16 weight bytes, FP8 peak, W4A16 dequantization", "[roofline][precision]") {
  ModelConfig m = model("llama-3.1-8b");
  const HardwareSpec hw = h100_without_overhead();
  const double embed = 2.0 * m.vocab_size * m.hidden_size;  // embedding table and LM head, parameters
  const double linear = static_cast<double>(m.num_params()) - embed - m.num_layers * (2.0 * m.hidden_size) - m.hidden_size;
  const double bf16 = weight_bytes_per_gpu(m, 1);
  m.precision = "fp8";
  // Linear layers 1 byte a weight; embeddings, LM head and norms stay 2.
  CHECK(weight_bytes_per_gpu(m, 1) == Approx(linear * 1 + (m.num_params() - linear) * 2));
  const RooflineCostModel fp8(hw, m, 1);
  m.precision = "w4a16";
  m.quant_group_size = 128;
  // 4 bits, plus a 16-bit scale and a 4-bit zero per 128 weights.
  CHECK(weight_bytes_per_gpu(m, 1) == Approx(linear * (0.5 + 2.5 / 128) + (m.num_params() - linear) * 2));
  CHECK(weight_bytes_per_gpu(m, 1) < 0.4 * bf16);
  const RooflineCostModel w4(hw, m, 1);
  m.precision = "";
  const RooflineCostModel base(hw, m, 1);
  // KV capacity grows by the freed weight bytes.
  ModelConfig q = m;
  q.precision = "fp8";
  CHECK(kv_blocks_from_memory(hw, q, 16, 0.9, 1) > kv_blocks_from_memory(hw, m, 16, 0.9, 1));
  // Decode at batch 1 is weight-bound: the QKV projection's time is its bytes.
  const StepCost b1 = base.breakdown(decode_shape(1, 512)), f1 = fp8.breakdown(decode_shape(1, 512)),
                 w1 = w4.breakdown(decode_shape(1, 512));
  CHECK(f1.op("qkv_proj").memory_s == Approx(b1.op("qkv_proj").memory_s / 2).epsilon(0.01));
  CHECK(w1.op("qkv_proj").memory_s == Approx(b1.op("qkv_proj").memory_s * (0.5 + 2.5 / 128) / 2).epsilon(0.01));
  CHECK(w1.op("lm_head").bytes == Approx(b1.op("lm_head").bytes));  // the LM head stays 16-bit
  // FP8 runs its GEMMs at the FP8 peak: half the compute time of bf16 for the same FLOPs.
  const StepCost bp = base.breakdown(prefill_shape(4096)), fp = fp8.breakdown(prefill_shape(4096));
  CHECK(fp.op("mlp_gate_up").compute_s == Approx(bp.op("mlp_gate_up").compute_s * 989.4 / 1978.9));  // h100-sxm.ini peaks
  // W4A16 dequantizes every weight once per 64 rows (4 operations at the FP32 rate):
  // hidden under the weight reads at batch 1, a loss against bf16 in a long prefill.
  const double qkv_weights = 32.0 * 4096 * (4096 + 2 * 1024);
  CHECK(w1.op("qkv_proj").compute_s - b1.op("qkv_proj").compute_s == Approx(qkv_weights * 4 / 66.9e12));
  CHECK(w1.op("qkv_proj").time_s() == Approx(w1.op("qkv_proj").memory_s));
  const StepCost wp = w4.breakdown(prefill_shape(4096));
  CHECK(wp.op("qkv_proj").compute_s == Approx(bp.op("qkv_proj").compute_s + qkv_weights * 64 * 4 / 66.9e12));
  CHECK(wp.total_s > bp.total_s);
}

TEST_CASE("roofline predict is breakdown's total, bit for bit, whatever steps came before", "[roofline]") {
  // predict() keeps the weight GEMMs' terms per (tokens, rows) and never
  // builds the ops; its sum must still be breakdown's, to the last bit, for
  // dense, MoE, W4A16 and tensor-parallel models, on a spec whose GEMMs
  // combine compute and memory by an exponent, with several models
  // interleaved on one thread (the memo is keyed by model, not by address).
  std::vector<std::unique_ptr<RooflineCostModel>> models;
  const HardwareSpec h100 = HardwareSpec::from_ini_file(kH100);
  HardwareSpec overlapped = h100;
  overlapped.overlap_exponent = 2.5;
  overlapped.layer_overhead_s = 3e-6;
  ModelConfig w4 = model("llama-3.1-8b");
  w4.precision = "w4a16";
  models.push_back(std::make_unique<RooflineCostModel>(h100, model("llama-3.1-8b"), 1));
  models.push_back(std::make_unique<RooflineCostModel>(overlapped, model("llama-3.1-8b"), 1));
  models.push_back(std::make_unique<RooflineCostModel>(h100, w4, 1));
  models.push_back(std::make_unique<RooflineCostModel>(h100, model("llama-3.1-70b"), 4));
  models.push_back(std::make_unique<RooflineCostModel>(overlapped, model("mixtral-8x7b"), 2));
  models.push_back(std::make_unique<RooflineCostModel>(h100, model("qwen3-30b-a3b"), 8, 8));
  Rng rng(7);
  int compared = 0;
  for (int round = 0; round < 4000; ++round) {
    StepShape shape;
    // Few distinct sizes, so (tokens, rows) pairs repeat and the memo answers.
    const int num_seqs = static_cast<int>(rng.below(round % 3 == 0 ? 4 : 40));
    for (int i = 0; i < num_seqs; ++i) {
      SeqShape q;
      q.num_computed = static_cast<int>(rng.below(4000));
      q.is_decode = rng.below(4) != 0;
      q.num_new = q.is_decode ? 1 + static_cast<int>(rng.below(2)) : 1 + static_cast<int>(rng.below(600));
      q.samples = rng.below(8) != 0;
      q.num_draft = q.is_decode ? q.num_new - 1 : 0;
      shape.push_back(q);
    }
    const RooflineCostModel& m = *models[rng.below(models.size())];
    const double fast = m.predict(shape), full = m.breakdown(shape).total_s;
    INFO("round " << round << ", " << num_seqs << " sequences, " << m.model().name);
    REQUIRE(std::memcmp(&fast, &full, sizeof fast) == 0);
    ++compared;
  }
  CHECK(compared == 4000);
  // 301 steps of 600 tokens with 0..300 sampling rows share 256 memo slots:
  // pairs with equal token counts collide, and must not answer each other.
  for (int pass = 0; pass < 3; ++pass)
    for (int r = 0; r <= 300; ++r) {
      const int rows = pass == 1 ? 300 - r : r;
      StepShape shape = prefill_shape(600 - rows, 100, false);
      for (int i = 0; i < rows; ++i) shape.push_back(decode_shape(1, 200 + i)[0]);
      const RooflineCostModel& m = *models[pass];
      const double fast = m.predict(shape), full = m.breakdown(shape).total_s;
      INFO("pass " << pass << ", " << rows << " rows");
      REQUIRE(std::memcmp(&fast, &full, sizeof fast) == 0);
    }
  // A model built where a destroyed one lived gets no stale terms.
  for (int i = 0; i < 3; ++i) {
    HardwareSpec hw = h100;
    hw.bandwidth_gbps *= 1 + i;
    auto m = std::make_unique<RooflineCostModel>(hw, model("llama-3.1-8b"), 1);
    const StepShape s = decode_shape(16, 1000);
    CHECK(m->predict(s) == m->breakdown(s).total_s);
  }
}
