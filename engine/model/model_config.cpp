#include "engine/model/model_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/common/config_error.h"

namespace testbed {
namespace {

using nlohmann::json;

template <class T>
T field(const json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) throw ConfigError(origin + ": missing field '" + key + "'");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw ConfigError(origin + ": field '" + key + "' has the wrong type (" + it->dump() + ")");
  }
}

template <class T>
T field_or(const json& j, const char* key, T fallback, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return field<T>(j, key, origin);
}

}  // namespace

ModelConfig ModelConfig::from_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open model config");
  std::stringstream text;
  text << in.rdbuf();
  ModelConfig cfg = from_json_text(text.str(), path);
  cfg.name = std::filesystem::path(path).stem().string();
  return cfg;
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ConfigError(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw ConfigError(origin + ": a model config must be a JSON object");
  ModelConfig c;
  c.model_type = field_or<std::string>(j, "model_type", "llama", origin);
  c.hidden_size = field<int>(j, "hidden_size", origin);
  c.intermediate_size = field<int>(j, "intermediate_size", origin);
  c.num_layers = field<int>(j, "num_hidden_layers", origin);
  c.num_heads = field<int>(j, "num_attention_heads", origin);
  c.num_kv_heads = field_or<int>(j, "num_key_value_heads", c.num_heads, origin);
  c.vocab_size = field<int>(j, "vocab_size", origin);
  c.max_position_embeddings = field_or<int>(j, "max_position_embeddings", 2048, origin);
  c.rms_norm_eps = field_or<double>(j, "rms_norm_eps", 1e-5, origin);
  c.rope_theta = field_or<double>(j, "rope_theta", 10000.0, origin);
  c.tie_word_embeddings = field_or<bool>(j, "tie_word_embeddings", false, origin);
  c.initializer_range = field_or<double>(j, "initializer_range", 0.02, origin);
  c.torch_dtype = field_or<std::string>(j, "torch_dtype", "bfloat16", origin);
  c.qk_norm = c.model_type == "qwen3";
  auto require_positive = [&](int v, const char* key) {
    if (v <= 0) throw ConfigError(origin + ": field '" + key + "' must be positive");
  };
  require_positive(c.hidden_size, "hidden_size");
  require_positive(c.intermediate_size, "intermediate_size");
  require_positive(c.num_layers, "num_hidden_layers");
  require_positive(c.num_heads, "num_attention_heads");
  require_positive(c.num_kv_heads, "num_key_value_heads");
  require_positive(c.vocab_size, "vocab_size");
  if (c.num_heads % c.num_kv_heads != 0)
    throw ConfigError(origin + ": num_attention_heads must be a multiple of num_key_value_heads");
  if (c.hidden_size % c.num_heads != 0 && !j.contains("head_dim"))
    throw ConfigError(origin + ": hidden_size is not a multiple of num_attention_heads; give head_dim");
  c.head_dim = field_or<int>(j, "head_dim", c.hidden_size / c.num_heads, origin);
  require_positive(c.head_dim, "head_dim");
  if (c.head_dim % 2 != 0) throw ConfigError(origin + ": head_dim must be even for RoPE");
  if (c.dtype_bytes() == 0) throw ConfigError(origin + ": unsupported torch_dtype '" + c.torch_dtype + "'");

  auto rs = j.find("rope_scaling");
  if (rs != j.end() && rs->is_object()) {
    std::string type = field_or<std::string>(*rs, "rope_type", "", origin);
    if (type.empty()) type = field_or<std::string>(*rs, "type", "", origin);
    if (type == "llama3") {
      c.rope_scaling.type = type;
      c.rope_scaling.factor = field<double>(*rs, "factor", origin + " rope_scaling");
      c.rope_scaling.low_freq_factor = field_or<double>(*rs, "low_freq_factor", 1.0, origin);
      c.rope_scaling.high_freq_factor = field_or<double>(*rs, "high_freq_factor", 4.0, origin);
      c.rope_scaling.original_max_position_embeddings =
          field_or<int>(*rs, "original_max_position_embeddings", 8192, origin);
    } else if (!type.empty() && type != "default") {
      throw ConfigError(origin + ": rope_scaling type '" + type + "' is not supported (only llama3)");
    }
  }
  return c;
}

int64_t ModelConfig::num_layer_params() const {
  const int64_t h = hidden_size;
  const int64_t attn = h * q_size() + 2 * h * kv_size() + static_cast<int64_t>(q_size()) * h;
  const int64_t mlp = 3 * h * intermediate_size;
  const int64_t norms = 2 * h + (qk_norm ? 2 * head_dim : 0);
  return attn + mlp + norms;
}

int64_t ModelConfig::num_params() const {
  const int64_t embed = static_cast<int64_t>(vocab_size) * hidden_size;
  return embed * (tie_word_embeddings ? 1 : 2) + num_layers * num_layer_params() + hidden_size;
}

int ModelConfig::dtype_bytes() const {
  if (torch_dtype == "float32") return 4;
  if (torch_dtype == "bfloat16" || torch_dtype == "float16") return 2;
  if (torch_dtype == "float8_e4m3fn" || torch_dtype == "int8") return 1;
  return 0;
}

}  // namespace testbed
