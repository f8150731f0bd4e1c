// Quantized checkpoints (engine/model/quantized_checkpoint.h): a micro model's
// weights quantized with RTN and written in AutoGPTQ's layout (codes along K,
// zeros stored minus 1, a permuted g_idx), AutoAWQ's (packed along N in the
// order 0 2 4 6 1 3 5 7) and as FP8 with weight_scale read back to the same
// dequantized weights; shape, dtype and precision errors name the tensor or key.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "engine/common/config_error.h"
#include "engine/model/float16.h"
#include "engine/model/llama_weights.h"
#include "engine/model/quantized_checkpoint.h"
#include "engine/model/safetensors.h"
#include "kernels/gemm/gemm_ref.h"
#include "support/engine_harness.h"
#include "support/scratch.h"

using namespace testbed;
using namespace testbed::test;
namespace fs = std::filesystem;

namespace {

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

RawTensor f16(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_fp16(v[i]);
  return {name, "F16", shape, bytes_of(h)};
}

RawTensor f32(const std::string& name, const Tensor& t) { return {name, "F32", t.shape, bytes_of(t.data)}; }

// Writes `w` as a checkpoint whose linears are `format` ("gptq", "awq", "fp8");
// returns the dequantized weights the reader must reproduce.
LlamaWeights write_checkpoint(const ModelConfig& cfg, const LlamaWeights& w, const std::string& format, int g,
                              const std::string& path, std::vector<RawTensor>* tensors = nullptr) {
  std::vector<RawTensor> out;
  LlamaWeights expect = w;
  LlamaWeights copy = w;
  for_each_weight(cfg, copy, [&](const std::string& name, Tensor& t, const std::vector<int64_t>& shape, bool) {
    const bool linear = name.size() > 12 && name.compare(name.size() - 12, 12, "_proj.weight") == 0;
    if (!linear) {
      out.push_back(f32(name, t));
      return;
    }
    const std::string prefix = name.substr(0, name.size() - 7);
    const int n = static_cast<int>(shape[0]), k = static_cast<int>(shape[1]);
    std::vector<float> deq(static_cast<size_t>(n) * k);
    if (format == "fp8") {
      const std::vector<float> s = fp8_scales_per_row(t.data.data(), n, k);
      const std::vector<uint8_t> q = quantize_fp8(t.data.data(), n, k, s);
      out.push_back({name, "F8_E4M3", shape, q});
      out.push_back({prefix + ".weight_scale", "F32", {n, 1}, bytes_of(s)});
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < k; ++c) deq[r * k + c] = e4m3_to_float(q[r * k + c]) * s[r];
    } else {
      W4Weights q = quantize_w4_rtn(t.data.data(), n, k, g, false);
      for (float& s : q.scales) s = fp16_to_float(float_to_fp16(s));  // stored as F16
      const int groups = k / g;
      std::vector<float> st(static_cast<size_t>(groups) * n);  // [K/g, N]
      for (int r = 0; r < n; ++r)
        for (int gg = 0; gg < groups; ++gg) st[gg * n + r] = q.scales[r * groups + gg];
      std::vector<int32_t> zeros(static_cast<size_t>(groups) * (n / 8), 0);
      std::vector<int32_t> qw(format == "gptq" ? static_cast<size_t>(k / 8) * n : static_cast<size_t>(k) * (n / 8), 0);
      const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // AWQ: nibble i holds column order[i] of its 8
      for (int r = 0; r < n; ++r) {
        for (int gg = 0; gg < groups; ++gg) {
          const uint32_t zv = q.zeros[r * groups + gg];
          if (format == "gptq")
            zeros[gg * (n / 8) + r / 8] |= static_cast<int32_t>(((zv - 1) & 0xF) << (4 * (r % 8)));
          else
            for (int i = 0; i < 8; ++i)
              if (order[i] == r % 8) zeros[gg * (n / 8) + r / 8] |= static_cast<int32_t>(zv << (4 * i));
        }
        for (int c = 0; c < k; ++c) {
          const uint32_t code = static_cast<uint32_t>(q.code(r, c));
          if (format == "gptq")
            qw[(c / 8) * n + r] |= static_cast<int32_t>(code << (4 * (c % 8)));
          else
            for (int i = 0; i < 8; ++i)
              if (order[i] == r % 8) qw[c * (n / 8) + r / 8] |= static_cast<int32_t>(code << (4 * i));
        }
      }
      out.push_back({prefix + ".qweight", "I32", format == "gptq" ? std::vector<int64_t>{k / 8, n} : std::vector<int64_t>{k, n / 8},
                     bytes_of(qw)});
      out.push_back({prefix + ".qzeros", "I32", {groups, n / 8}, bytes_of(zeros)});
      out.push_back(f16(prefix + ".scales", {groups, n}, st));
      if (format == "gptq") {
        std::vector<int32_t> gi(k);
        for (int c = 0; c < k; ++c) gi[c] = c / g;
        out.push_back({prefix + ".g_idx", "I32", {k}, bytes_of(gi)});
      }
      deq = dequantize_w4(q);
    }
    // The expected tensor: find it in `expect` by walking the same order.
    for_each_weight(cfg, expect, [&](const std::string& nm, Tensor& e, const std::vector<int64_t>&, bool) {
      if (nm == name) e.data = deq;
    });
  });
  write_safetensors_raw(path, out);
  if (tensors) *tensors = out;
  return expect;
}

}  // namespace

TEST_CASE("GPTQ, AWQ and FP8 checkpoints read back to their dequantized weights", "[quant][checkpoint]") {
  const ModelConfig base = micro_model(512, 2, 64, 4, 2);
  const LlamaWeights w = make_dummy_weights(base, 7);
  const fs::path dir = testbed_test::scratch_root("testbed_qckpt");
  for (const std::string format : {"gptq", "awq", "fp8"}) {
    INFO(format);
    const std::string path = (dir / (format + ".safetensors")).string();
    const LlamaWeights expect = write_checkpoint(base, w, format, 32, path);
    std::string seen;
    const LlamaWeights got = load_checkpoint(base, path, &seen);
    CHECK(seen == format);
    for (int l = 0; l < base.num_layers; ++l) {
      CHECK(got.layers[l].wq.data == expect.layers[l].wq.data);
      CHECK(got.layers[l].w_down.data == expect.layers[l].w_down.data);
      // The codes the GPU kernels read are kept, in their layout.
      for (int i = 0; i < 7; ++i) {
        if (format == "fp8") {
          CHECK(got.layers[l].f8_codes[i].size() == got.layers[l].f8_scales[i].size() * (i == 6 ? 128u : 64u));
        } else {
          REQUIRE(got.layers[l].q4[i].n > 0);
          CHECK(dequantize_w4(got.layers[l].q4[i]) ==
                (i == 0 ? got.layers[l].wq.data : i == 6 ? got.layers[l].w_down.data : dequantize_w4(got.layers[l].q4[i])));
        }
      }
    }
    CHECK(got.embed.data == w.embed.data);
    // load_weights insists that the config says the checkpoint's precision.
    ModelConfig cfg = base;
    CHECK_THROWS_WITH(load_weights(cfg, path, 0), Catch::Contains("model.precision"));
    cfg.precision = format == "fp8" ? "fp8" : "w4a16";
    CHECK(load_weights(cfg, path, 0).quantized_format == format);
  }
  // Damaged checkpoints: a qweight of neither layout, a g_idx naming a group that does not exist.
  std::vector<RawTensor> raw;
  const std::string path = (dir / "bad.safetensors").string();
  write_checkpoint(base, w, "gptq", 32, path, &raw);
  for (auto [tensor, damage] : {std::pair<std::string, int>{"model.layers.0.self_attn.q_proj.qweight", 0},
                                {"model.layers.1.mlp.down_proj.g_idx", 1}}) {
    std::vector<RawTensor> bad = raw;
    for (RawTensor& t : bad)
      if (t.name == tensor) {
        if (damage == 0) {
          t.shape = {t.shape[0] / 2, t.shape[1] * 2};
        } else {
          const int32_t big = 99;
          std::memcpy(t.bytes.data(), &big, 4);
        }
      }
    write_safetensors_raw(path, bad);
    INFO(tensor);
    CHECK_THROWS_WITH(load_checkpoint(base, path, nullptr), Catch::Contains(tensor) && Catch::Contains(path));
  }
  fs::remove_all(dir);
}
