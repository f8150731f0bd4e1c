// ModelConfig: a Llama-family decoder's architecture, read from a Hugging Face
// config.json (Llama 2/3.x, Qwen2/3 and their kin: RMSNorm, RoPE, GQA, SwiGLU).
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

  // Parses config.json; throws ConfigError naming the file and the field.
  static ModelConfig from_json_file(const std::string& path);
  static ModelConfig from_json_text(const std::string& text, const std::string& origin);

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
  int64_t num_params() const;          // including embeddings and LM head
  int64_t num_layer_params() const;    // one decoder layer
  int dtype_bytes() const;             // of torch_dtype
  // K and V bytes per token over all layers, at `bytes` per element.
  int64_t kv_bytes_per_token(int bytes) const { return 2LL * num_layers * kv_size() * bytes; }
};

}  // namespace testbed
