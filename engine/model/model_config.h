// ModelConfig: a Llama-family decoder's architecture, read from a Hugging Face
// config.json (Llama 2/3.x, Mistral, Qwen2/3 and their kin: RMSNorm, RoPE, GQA,
// SwiGLU), and the mixture-of-experts variants of that decoder: Mixtral
// (num_local_experts, num_experts_per_tok, intermediate_size per expert),
// Qwen2/3-MoE (num_experts, moe_intermediate_size, shared_expert_intermediate_size,
// decoder_sparse_step, mlp_only_layers) and DeepSeekMoE (n_routed_experts,
// n_shared_experts, moe_intermediate_size, first_k_dense_replace).
//
// What the testbed does not model is an error naming the field, never a
// silently different model: an `architectures` entry outside the list in
// model_config.cpp, multi-head latent attention (kv_lora_rank: DeepSeek-V2/V3),
// sliding-window attention, MoE every n-th layer in DeepSeek's moe_layer_freq.
#pragma once

#include <cstdint>
#include <string>

namespace testbed {

struct RopeScaling {
  std::string type;  // "" (none) or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

// The experts of a mixture-of-experts MLP (num_experts = 0: a dense model).
struct MoeConfig {
  int num_experts = 0;          // routed experts per MoE layer
  int experts_per_token = 0;    // top-k routing
  int expert_intermediate = 0;  // each routed expert's SwiGLU width
  int num_shared_experts = 0;   // experts every token also runs (DeepSeek, Qwen2-MoE)
  int shared_intermediate = 0;  // each shared expert's width
  int num_dense_layers = 0;     // layers with a dense MLP of intermediate_size instead
  bool enabled() const { return num_experts > 0; }
};

struct ModelConfig {
  std::string name;        // file stem, for reports
  std::string model_type;  // "llama", "qwen3", ...
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qk_norm = false;  // Qwen3: RMSNorm over each head of q and k before RoPE
  double initializer_range = 0.02;
  std::string torch_dtype = "bfloat16";
  std::string architecture;  // architectures[0] ("" when the file names none: a Llama)
  MoeConfig moe;
  // How the linear layers' weights are stored and multiplied (model.precision):
  //   ""     the checkpoint's torch_dtype
  //   fp8    e4m3 weights with a per-output-channel fp32 scale, GEMMs at the FP8 peak
  //   w4a16  int4 weights in groups of quant_group_size along K, each group with a
  //          16-bit scale and a 4-bit zero point; 16-bit activations, GEMMs at the
  //          16-bit peak (dequantized in registers)
  // Embeddings, the LM head, norms, activations and the KV cache stay 16-bit.
  std::string precision;
  int quant_group_size = 128;
  std::string quant_method = "rtn";  // w4a16: rtn | gptq | awq (engine/model/quantize_weights.h)

  // Parses config.json; throws ConfigError("<file>: <field>: <what>") for any
  // malformed input: not JSON (numbers beyond double too), a field of the wrong
  // JSON type, an integer that is not whole or does not fit an int, a size or
  // real that must be positive, heads x head_dim past an int or more than 2^50
  // parameters, a model_type / architectures outside the supported list or
  // naming different models. Fuzz entry points: only ConfigError.
  static ModelConfig from_json_file(const std::string& path);
  static ModelConfig from_json_text(const std::string& text, const std::string& origin);

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
  int64_t num_params() const;          // including embeddings and LM head (every expert)
  int64_t num_active_params() const;   // what one token runs through (its top-k experts only)
  int64_t num_layer_params() const;    // one decoder layer (a MoE layer when the model has experts)
  int num_moe_layers() const { return moe.enabled() ? num_layers - moe.num_dense_layers : 0; }
  int num_dense_mlp_layers() const { return num_layers - num_moe_layers(); }
  int64_t attention_params() const;    // one layer's projections and norms
  int dtype_bytes() const;             // of torch_dtype
  // Bytes per parameter of a linear layer's weight at `precision`, scales and zeros included.
  double linear_weight_bytes() const;
  // Bytes per parameter of the rest (embeddings, LM head, norms).
  double other_weight_bytes() const;
  // The dtype whose tensor peak the linear layers' GEMMs run at.
  std::string gemm_dtype() const;
  // K and V bytes per token over all layers, at `bytes` per element.
  int64_t kv_bytes_per_token(int bytes) const { return 2LL * num_layers * kv_size() * bytes; }
};

}  // namespace testbed
