#include "engine/model/llama_weights.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "engine/common/config_error.h"
#include "engine/model/quantized_checkpoint.h"
#include "engine/model/safetensors.h"
#include "engine/common/rng.h"

namespace testbed {

void for_each_weight(const ModelConfig& c, LlamaWeights& w,
                     const std::function<void(const std::string&, Tensor&, const std::vector<int64_t>&, bool)>& fn) {
  // The executors run dense decoders; experts are modelled by the simulator only.
  require(!c.moe.enabled(), "model.config",
          c.name + " is a mixture-of-experts model (" + std::to_string(c.moe.num_experts) + " experts, top-" +
              std::to_string(c.moe.experts_per_token) +
              "): the CPU and CUDA executors run dense models only; simulate it (executor.kind = sim)");
  // Every weight is held as fp32 here: more than the machine has would be a bad_alloc halfway through.
  const double bytes = 4.0 * static_cast<double>(c.num_params());
  const double machine = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (bytes > machine) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "%s's %lld parameters need %.1f GiB as fp32; this machine has %.1f GiB",
                  c.name.c_str(), static_cast<long long>(c.num_params()), bytes / (1 << 30), machine / (1 << 30));
    throw ConfigError(std::string("model.config: ") + msg);
  }
  const int64_t h = c.hidden_size, inter = c.intermediate_size, q = c.q_size(), kv = c.kv_size();
  fn("model.embed_tokens.weight", w.embed, {c.vocab_size, h}, false);
  w.layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    fn(p + "input_layernorm.weight", L.attn_norm, {h}, true);
    fn(p + "self_attn.q_proj.weight", L.wq, {q, h}, false);
    fn(p + "self_attn.k_proj.weight", L.wk, {kv, h}, false);
    fn(p + "self_attn.v_proj.weight", L.wv, {kv, h}, false);
    fn(p + "self_attn.o_proj.weight", L.wo, {h, q}, false);
    if (c.qk_norm) {
      fn(p + "self_attn.q_norm.weight", L.q_norm, {c.head_dim}, true);
      fn(p + "self_attn.k_norm.weight", L.k_norm, {c.head_dim}, true);
    }
    fn(p + "post_attention_layernorm.weight", L.mlp_norm, {h}, true);
    fn(p + "mlp.gate_proj.weight", L.w_gate, {inter, h}, false);
    fn(p + "mlp.up_proj.weight", L.w_up, {inter, h}, false);
    fn(p + "mlp.down_proj.weight", L.w_down, {h, inter}, false);
  }
  fn("model.norm.weight", w.final_norm, {h}, true);
  if (!c.tie_word_embeddings) fn("lm_head.weight", w.lm_head, {c.vocab_size, h}, false);
}

LlamaWeights make_dummy_weights(const ModelConfig& cfg, uint64_t seed) {
  LlamaWeights w;
  uint64_t tensor_index = 0;
  for_each_weight(cfg, w, [&](const std::string&, Tensor& t, const std::vector<int64_t>& shape, bool is_norm) {
    t.shape = shape;
    t.data.assign(t.numel(), 1.0f);
    if (is_norm) return;
    Rng rng(mix_seed(seed, ++tensor_index));
    const float stddev = static_cast<float>(cfg.initializer_range);
    for (float& v : t.data) v = stddev * static_cast<float>(rng.normal());
  });
  return w;
}

LlamaWeights load_safetensors_weights(const ModelConfig& cfg, const std::string& path) {
  SafetensorsFile file(path);
  LlamaWeights w;
  for_each_weight(cfg, w, [&](const std::string& name, Tensor& t, const std::vector<int64_t>& shape, bool) {
    t = file.read(name, shape);
  });
  return w;
}

LlamaWeights load_weights(const ModelConfig& cfg, const std::string& weights, uint64_t seed) {
  if (weights == "dummy") return make_dummy_weights(cfg, seed);
  std::error_code ec;  // the non-throwing overload: a path too long to stat is an error here, not a filesystem_error
  require(std::filesystem::is_regular_file(weights, ec), "model.weights", "file not found: " + weights);
  std::string format;
  LlamaWeights w = load_checkpoint(cfg, weights, &format);
  // A quantized checkpoint is run as stored: the config must say which precision that is.
  const std::string want = format == "fp8" ? "fp8" : format.empty() ? "" : "w4a16";
  require(format.empty() || cfg.precision == want, "model.precision",
          weights + " is a " + format + " checkpoint: set model.precision = " + want);
  require(!format.empty() || cfg.precision.empty() || cfg.precision == "fp8" || cfg.precision == "w4a16",
          "model.precision", "unknown precision '" + cfg.precision + "'");
  w.quantized_format = format;
  return w;
}

void save_safetensors_weights(const ModelConfig& cfg, const LlamaWeights& w, const std::string& path,
                              const std::string& dtype) {
  std::vector<std::pair<std::string, const Tensor*>> list;
  LlamaWeights& mutable_w = const_cast<LlamaWeights&>(w);
  for_each_weight(cfg, mutable_w, [&](const std::string& name, Tensor& t, const std::vector<int64_t>&, bool) {
    list.emplace_back(name, &t);
  });
  write_safetensors(path, list, dtype);
}

}  // namespace testbed
