// Weights of a Llama-family decoder, as float tensors with Hugging Face shapes
// ([out_features, in_features] for projections). Either seeded dummy values
// (normal with the config's initializer_range, norms at one: what vLLM's
// load_format=dummy is for, benchmarking without a checkpoint) or a
// safetensors file with Hugging Face tensor names.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/tensor.h"
#include "kernels/gemm/gemm_ref.h"

namespace testbed {

struct LayerWeights {
  Tensor attn_norm;       // [hidden]
  Tensor wq, wk, wv, wo;  // [q_size, hidden], [kv_size, hidden] x2, [hidden, q_size]
  Tensor q_norm, k_norm;  // [head_dim] (qk_norm models only)
  Tensor mlp_norm;        // [hidden]
  Tensor w_gate, w_up;    // [intermediate, hidden]
  Tensor w_down;          // [hidden, intermediate]
  // AWQ's per-input-channel scales, one per linear in the order q, k, v, o,
  // gate, up, down (empty: none): that linear's input is divided by it.
  std::vector<float> input_scale[7];
  // w4a16 (RTN, GPTQ): each linear's codes, scales and zeros, the weights above
  // being their dequantization; what the CUDA executor's W4A16 kernel reads.
  W4Weights q4[7];
  // fp8: each linear's e4m3 codes [n][k] and per-output-channel scales [n].
  std::vector<uint8_t> f8_codes[7];
  std::vector<float> f8_scales[7];
};

struct LlamaWeights {
  Tensor embed;       // [vocab, hidden]
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [hidden]
  Tensor lm_head;     // [vocab, hidden]; empty when tied to embed
  const Tensor& output_embedding() const { return lm_head.empty() ? embed : lm_head; }
  // "" or the quantized checkpoint its linears were read from ("gptq", "awq", "fp8"): already quantized.
  std::string quantized_format;
};

// Visits every tensor the config needs with its Hugging Face name and shape.
void for_each_weight(const ModelConfig& cfg, LlamaWeights& w,
                     const std::function<void(const std::string& name, Tensor& t, const std::vector<int64_t>& shape,
                                              bool is_norm)>& fn);

LlamaWeights make_dummy_weights(const ModelConfig& cfg, uint64_t seed);
// Throws ConfigError naming the file and the first missing, mismatched or truncated tensor.
LlamaWeights load_safetensors_weights(const ModelConfig& cfg, const std::string& path);
// Either of the two: "dummy" makes seeded dummy weights, anything else is a
// safetensors path (model.weights; a missing file is a ConfigError naming it).
LlamaWeights load_weights(const ModelConfig& cfg, const std::string& weights, uint64_t seed);
void save_safetensors_weights(const ModelConfig& cfg, const LlamaWeights& w, const std::string& path,
                              const std::string& dtype);

}  // namespace testbed
