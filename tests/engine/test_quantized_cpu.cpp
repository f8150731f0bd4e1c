// Quantized execution on the CPU executor (engine/model/quantize_weights.h):
// the round trip of each method, GPTQ's and AWQ's per-layer output error on
// the model's own activations below RTN's, FP8's inputs rounded per token,
// and a quantized model that still generates.
#include <catch2/catch.hpp>

#include "engine/cpu_executor.h"
#include "engine/kv_cache_manager.h"
#include "engine/model/quantize_weights.h"
#include "kernels/gemm/quantize_ref.h"
#include "engine/metrics/run_recorder.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

// Every linear's inputs over `tokens` (one prefill of the unquantized model).
CalibrationInputs capture(const ModelConfig& cfg, const LlamaWeights& w, const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size()), bs = 16, blocks = n / bs + 2;
  CpuExecutor exec(cfg, w, blocks, bs, n + 1);
  CalibrationInputs calib;
  exec.set_linear_observer([&](int layer, int linear, const float* in, int rows, int k) {
    std::vector<float>& v = calib[{layer, linear}];
    v.insert(v.end(), in, in + static_cast<size_t>(rows) * k);
  });
  KvCacheManager kv(blocks, bs, false);
  Request r;
  r.prompt = tokens;
  Sequence seq(std::move(r));
  REQUIRE(kv.allocate(seq, n));
  Batch b;
  b.add(&seq, 0, n);
  exec.execute(b);
  return calib;
}

}  // namespace

TEST_CASE("GPTQ and AWQ beat RTN on the model's own held-out activations", "[quant]") {
  const ModelConfig cfg = micro_model(512, 2, 128, 4, 2);
  const LlamaWeights w = make_dummy_weights(cfg, 3);
  const CalibrationInputs calib = capture(cfg, w, calibration_tokens(cfg.vocab_size, 2048, 1));
  const CalibrationInputs held = capture(cfg, w, calibration_tokens(cfg.vocab_size, 512, 2));
  double e_rtn = 0, e_gptq = 0;
  for (int layer = 0; layer < cfg.num_layers; ++layer)
    for (int lin : {kLinQ, kLinO, kLinGate, kLinDown}) {
      const Tensor& t = lin == kLinQ ? w.layers[layer].wq : lin == kLinO ? w.layers[layer].wo
                                     : lin == kLinGate ? w.layers[layer].w_gate : w.layers[layer].w_down;
      const int n = static_cast<int>(t.shape[0]), k = static_cast<int>(t.shape[1]);
      const std::vector<float>& x = calib.at({layer, lin});
      const std::vector<float>& xh = held.at({layer, lin});
      const int s = static_cast<int>(x.size() / k), sh = static_cast<int>(xh.size() / k);
      const W4Weights r = quantize_w4_rtn(t.data.data(), n, k, 64, false);
      const W4Weights g = quantize_w4_gptq(t.data.data(), n, k, x.data(), s, 64, false);
      const double er = layer_output_error(t.data.data(), dequantize_w4(r), n, k, xh.data(), sh);
      const double eg = layer_output_error(t.data.data(), dequantize_w4(g), n, k, xh.data(), sh);
      INFO("layer " << layer << " linear " << lin << ": RTN " << er << ", GPTQ " << eg);
      CHECK(eg < 1.3 * er);  // never much worse on one linear (down projections overfit a little)
      e_rtn += er;
      e_gptq += eg;
    }
  INFO("sum over linears: RTN " << e_rtn << ", GPTQ " << e_gptq);
  CHECK(e_gptq < 0.9 * e_rtn);
}

TEST_CASE("the CPU executor runs fp8 and w4a16 models: round-tripped weights, FP8 inputs, AWQ's input scales", "[quant]") {
  const ModelConfig base = micro_model(512, 2, 128, 4, 2);
  const LlamaWeights w = make_dummy_weights(base, 3);
  // fp8: every linear weight is on the e4m3 grid of its row's scale.
  ModelConfig f = base;
  f.precision = "fp8";
  const LlamaWeights wf = quantized_weights(f, w, 16);
  const Tensor& q = wf.layers[0].wq;
  float amax = 0;
  for (int c = 0; c < q.shape[1]; ++c) amax = std::max(amax, std::abs(w.layers[0].wq.data[c]));
  const float s = amax / 448.0f;
  for (int c = 0; c < q.shape[1]; ++c) CHECK(q.data[c] == Approx(e4m3_to_float(float_to_e4m3(w.layers[0].wq.data[c] / s)) * s));
  CHECK(wf.embed.data == w.embed.data);  // embeddings untouched
  // w4a16 rtn: the dequantized RTN weights, in the kernel's layout.
  ModelConfig r = base;
  r.precision = "w4a16";
  r.quant_group_size = 64;
  const LlamaWeights wr = quantized_weights(r, w, 16);
  const W4Weights rtn = quantize_w4_rtn(w.layers[1].w_down.data.data(), static_cast<int>(w.layers[1].w_down.shape[0]),
                                        static_cast<int>(w.layers[1].w_down.shape[1]), 64, false);
  CHECK(wr.layers[1].w_down.data == dequantize_w4(rtn));
  // awq: input scales on every linear, the weights are RTN of W diag(s).
  ModelConfig a = r;
  a.quant_method = "awq";
  const LlamaWeights wa = quantized_weights(a, w, 16);
  for (const auto& s_in : wa.layers[0].input_scale) CHECK(s_in.size() > 0);
  // Each of them generates, through an engine, deterministically.
  for (const ModelConfig& cfg : {f, r, a}) {
    INFO(cfg.precision << " " << cfg.quant_method);
    EngineConfig ec;
    ec.cache.block_size = 16;
    ec.max_model_len = 256;
    RunRecorder rec(true, true);
    Engine engine(0, ec, 64, std::make_unique<CpuExecutor>(cfg, quantized_weights(cfg, w, 16), 64, 16, 256), &rec);
    run_virtual(engine, shared_prefix_requests(3, 16, 4, 8, cfg.vocab_size, 2, 0.01));
    CHECK(rec.requests().size() == 3);
  }
}

