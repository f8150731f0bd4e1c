#include "engine/model/model_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

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

const char* const kArchitectures[] = {"LlamaForCausalLM",    "MistralForCausalLM",  "Qwen2ForCausalLM",
                                      "Qwen3ForCausalLM",    "MixtralForCausalLM",  "Qwen2MoeForCausalLM",
                                      "Qwen3MoeForCausalLM", "DeepseekForCausalLM"};

void read_architecture(const json& j, const std::string& origin, ModelConfig& c) {
  auto a = j.find("architectures");
  if (a != j.end() && !a->is_null()) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string())
      throw ConfigError(origin + ": field 'architectures' must be a list of names");
    c.architecture = (*a)[0].get<std::string>();
    bool known = false;
    std::string list;
    for (const char* k : kArchitectures) {
      known |= c.architecture == k;
      list += std::string(list.empty() ? "" : ", ") + k;
    }
    if (!known)
      throw ConfigError(origin + ": architectures: '" + c.architecture + "' is not supported (supported: " + list + ")");
  }
  // Attention the roofline and the executors do not model.
  for (const char* mla : {"kv_lora_rank", "q_lora_rank"})
    if (j.contains(mla) && !j[mla].is_null())
      throw ConfigError(origin + ": field '" + mla +
                        "': multi-head latent attention (DeepSeek-V2/V3) is not supported; only standard "
                        "multi-head / grouped-query attention");
  const bool sliding = field_or<bool>(j, "use_sliding_window", false, origin) ||
                       ((c.model_type == "mistral" || c.model_type == "mixtral") && j.contains("sliding_window") &&
                        !j["sliding_window"].is_null());
  if (sliding)
    throw ConfigError(origin + ": field 'sliding_window': sliding-window attention is not supported");
}

void read_experts(const json& j, const std::string& origin, ModelConfig& c) {
  MoeConfig& m = c.moe;
  const char* count_key = nullptr;
  for (const char* k : {"num_local_experts", "num_experts", "n_routed_experts"})
    if (j.contains(k) && !j[k].is_null() && !count_key) count_key = k;
  if (!count_key) return;
  m.num_experts = field<int>(j, count_key, origin);
  if (m.num_experts == 0) return;  // some dense configs carry num_experts = 0
  auto positive = [&](int v, const std::string& key) {
    if (v <= 0) throw ConfigError(origin + ": field '" + key + "' must be positive");
    return v;
  };
  positive(m.num_experts, count_key);
  m.experts_per_token = positive(field<int>(j, "num_experts_per_tok", origin), "num_experts_per_tok");
  if (m.experts_per_token > m.num_experts)
    throw ConfigError(origin + ": field 'num_experts_per_tok' exceeds the " + std::to_string(m.num_experts) +
                      " experts");
  // Mixtral's experts are intermediate_size wide; the others name their width.
  m.expert_intermediate = std::string(count_key) == "num_local_experts"
                              ? c.intermediate_size
                              : positive(field<int>(j, "moe_intermediate_size", origin), "moe_intermediate_size");
  if (j.contains("n_shared_experts") && !j["n_shared_experts"].is_null()) {  // DeepSeekMoE
    m.num_shared_experts = field<int>(j, "n_shared_experts", origin);
    m.shared_intermediate = m.expert_intermediate;
  }
  const int shared = field_or<int>(j, "shared_expert_intermediate_size", 0, origin);  // Qwen2-MoE: one shared expert
  if (shared > 0) m.num_shared_experts = 1, m.shared_intermediate = shared;
  if (m.num_shared_experts < 0) throw ConfigError(origin + ": field 'n_shared_experts' must be >= 0");
  // Which layers are dense.
  if (field_or<int>(j, "moe_layer_freq", 1, origin) != 1)
    throw ConfigError(origin + ": field 'moe_layer_freq': MoE on every n-th layer only is not supported");
  std::vector<bool> dense(static_cast<size_t>(c.num_layers), false);
  const int first_dense = field_or<int>(j, "first_k_dense_replace", 0, origin);
  if (first_dense < 0 || first_dense > c.num_layers)
    throw ConfigError(origin + ": field 'first_k_dense_replace' must be in [0, num_hidden_layers]");
  for (int i = 0; i < first_dense; ++i) dense[i] = true;
  const int step = field_or<int>(j, "decoder_sparse_step", 1, origin);
  if (step < 1) throw ConfigError(origin + ": field 'decoder_sparse_step' must be >= 1");
  for (int i = 0; i < c.num_layers; ++i)
    if ((i + 1) % step != 0) dense[i] = true;
  if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
    for (const json& l : j["mlp_only_layers"]) {
      if (!l.is_number_integer() || l.get<int>() < 0 || l.get<int>() >= c.num_layers)
        throw ConfigError(origin + ": field 'mlp_only_layers' must list layer indices in [0, num_hidden_layers)");
      dense[l.get<int>()] = true;
    }
  }
  m.num_dense_layers = static_cast<int>(std::count(dense.begin(), dense.end(), true));
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
  c.qk_norm = c.model_type == "qwen3" || c.model_type == "qwen3_moe";
  read_architecture(j, origin, c);
  auto require_positive = [&](int v, const char* key) {
    if (v <= 0) throw ConfigError(origin + ": field '" + key + "' must be positive");
  };
  require_positive(c.hidden_size, "hidden_size");
  require_positive(c.intermediate_size, "intermediate_size");
  require_positive(c.num_layers, "num_hidden_layers");
  require_positive(c.num_heads, "num_attention_heads");
  require_positive(c.num_kv_heads, "num_key_value_heads");
  require_positive(c.vocab_size, "vocab_size");
  read_experts(j, origin, c);
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

int64_t ModelConfig::attention_params() const {
  const int64_t h = hidden_size;
  const int64_t attn = h * q_size() + 2 * h * kv_size() + static_cast<int64_t>(q_size()) * h;
  const int64_t norms = 2 * h + (qk_norm ? 2 * head_dim : 0);
  return attn + norms;
}

namespace {

// One MoE layer's MLP parameters: the router, `routed` routed experts, the shared ones.
int64_t moe_mlp_params(const ModelConfig& c, int routed) {
  const int64_t h = c.hidden_size;
  return h * c.moe.num_experts + 3 * h * c.moe.expert_intermediate * routed +
         3 * h * static_cast<int64_t>(c.moe.shared_intermediate) * c.moe.num_shared_experts;
}

}  // namespace

int64_t ModelConfig::num_layer_params() const {
  if (moe.enabled()) return attention_params() + moe_mlp_params(*this, moe.num_experts);
  return attention_params() + 3LL * hidden_size * intermediate_size;
}

int64_t ModelConfig::num_params() const {
  const int64_t embed = static_cast<int64_t>(vocab_size) * hidden_size;
  const int64_t dense_mlp = 3LL * hidden_size * intermediate_size;
  const int64_t layers = num_layers * attention_params() + num_dense_mlp_layers() * dense_mlp +
                         (moe.enabled() ? num_moe_layers() * moe_mlp_params(*this, moe.num_experts) : 0);
  return embed * (tie_word_embeddings ? 1 : 2) + layers + hidden_size;
}

int64_t ModelConfig::num_active_params() const {
  if (!moe.enabled()) return num_params();
  return num_params() - num_moe_layers() * (moe_mlp_params(*this, moe.num_experts) -
                                            moe_mlp_params(*this, moe.experts_per_token));
}

double ModelConfig::linear_weight_bytes() const {
  if (precision == "fp8") return 1.0;  // + 4 bytes per output channel, under 0.1% at K >= 4096
  if (precision == "w4a16") return 0.5 + (2.0 + 0.5) / quant_group_size;  // 4-bit weight, 16-bit scale, 4-bit zero
  return dtype_bytes();
}

double ModelConfig::other_weight_bytes() const { return precision.empty() ? dtype_bytes() : std::max(dtype_bytes(), 2); }

std::string ModelConfig::gemm_dtype() const {
  if (precision == "fp8") return "float8_e4m3fn";
  if (precision == "w4a16") return dtype_bytes() >= 2 && torch_dtype != "float32" ? torch_dtype : "bfloat16";
  return torch_dtype;
}

int ModelConfig::dtype_bytes() const {
  if (torch_dtype == "float32") return 4;
  if (torch_dtype == "bfloat16" || torch_dtype == "float16") return 2;
  if (torch_dtype == "float8_e4m3fn" || torch_dtype == "int8") return 1;
  return 0;
}

}  // namespace testbed
