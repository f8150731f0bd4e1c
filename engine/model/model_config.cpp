#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "engine/common/config_error.h"

namespace testbed {
namespace {

using nlohmann::json;

// A JSON value for an error message: scalars as written, containers by kind
// (dumping a deeply nested value would recurse without bound).
std::string describe(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return v.dump();
}

// The fields of one JSON object, read strictly: the JSON type must match,
// integers must be whole and fit an int, numbers finite. Errors are
// ConfigError("<origin>: <prefix><key>: <what>").
class Fields {
 public:
  Fields(const json& j, const std::string& origin, const std::string& prefix = "")
      : j_(j), origin_(origin), prefix_(prefix) {}

  bool has(const std::string& key) const {
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ConfigError(origin_ + ": " + prefix_ + key + ": " + what);
  }

  int integer(const std::string& key) const { return as_int(value(key), key); }
  int integer(const std::string& key, int fallback) const { return has(key) ? integer(key) : fallback; }
  int positive(const std::string& key) const { return at_least(integer(key), 1, key); }
  int positive(const std::string& key, int fallback) const { return at_least(integer(key, fallback), 1, key); }
  int at_least(int v, int lo, const std::string& key) const {
    if (v < lo) fail(key, std::to_string(v) + (lo == 1 ? " must be positive" : " must be >= " + std::to_string(lo)));
    return v;
  }
  int as_int(const json& v, const std::string& key) const {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int>::max())) fail(key, v.dump() + " does not fit an int");
      return static_cast<int>(u);
    }
    if (v.is_number_integer()) {
      const int64_t i = v.get<int64_t>();
      if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max())
        fail(key, v.dump() + " does not fit an int");
      return static_cast<int>(i);
    }
    if (!v.is_number_float()) fail(key, "expected an integer, got " + describe(v));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) fail(key, v.dump() + " is not an integer");
    if (d < std::numeric_limits<int>::min() || d > std::numeric_limits<int>::max())
      fail(key, v.dump() + " does not fit an int");
    return static_cast<int>(d);
  }
  double number(const std::string& key) const {
    const json& v = value(key);
    if (!v.is_number()) fail(key, "expected a number, got " + describe(v));
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(key, v.dump() + " is not a finite number");
    return d;
  }
  double number(const std::string& key, double fallback) const { return has(key) ? number(key) : fallback; }
  // A finite number > 0.
  double positive_number(const std::string& key) const { return positive_value(number(key), key); }
  double positive_number(const std::string& key, double fallback) const {
    return positive_value(number(key, fallback), key);
  }
  double positive_value(double d, const std::string& key) const {
    if (!(d > 0)) fail(key, json(d).dump() + " must be positive");
    return d;
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = value(key);
    if (!v.is_boolean()) fail(key, "expected true or false, got " + describe(v));
    return v.get<bool>();
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = value(key);
    if (!v.is_string()) fail(key, "expected a string, got " + describe(v));
    return v.get<std::string>();
  }
  const json& value(const std::string& key) const {
    if (!has(key)) fail(key, "missing (a required field)");
    return j_.at(key);
  }

 private:
  const json& j_;
  const std::string& origin_;
  std::string prefix_;
};

// Each supported `architectures` entry and the model_type Hugging Face gives it.
const std::pair<const char*, const char*> kArchitectures[] = {
    {"LlamaForCausalLM", "llama"},       {"MistralForCausalLM", "mistral"},      {"Qwen2ForCausalLM", "qwen2"},
    {"Qwen3ForCausalLM", "qwen3"},       {"MixtralForCausalLM", "mixtral"},      {"Qwen2MoeForCausalLM", "qwen2_moe"},
    {"Qwen3MoeForCausalLM", "qwen3_moe"}, {"DeepseekForCausalLM", "deepseek"}};

// architectures[0] and model_type: both supported and naming the same model
// (qk_norm, sliding windows and experts follow from them).
void read_architecture(const Fields& f, ModelConfig& c) {
  std::string archs, types, implied;
  for (const auto& [arch, type] : kArchitectures) {
    archs += std::string(archs.empty() ? "" : ", ") + arch;
    types += std::string(types.empty() ? "" : ", ") + type;
  }
  if (f.has("architectures")) {
    const json& a = f.value("architectures");
    if (!a.is_array() || a.empty() || !a[0].is_string()) f.fail("architectures", "must be a list of names");
    c.architecture = a[0].get<std::string>();
    for (const auto& [arch, type] : kArchitectures)
      if (c.architecture == arch) implied = type;
    if (implied.empty()) f.fail("architectures", "'" + c.architecture + "' is not supported (supported: " + archs + ")");
  }
  c.model_type = f.text("model_type", implied.empty() ? "llama" : implied);
  bool known = false;
  for (const auto& kv : kArchitectures) known |= c.model_type == kv.second;
  if (!known) f.fail("model_type", "'" + c.model_type + "' is not supported (supported: " + types + ")");
  if (!implied.empty() && c.model_type != implied)
    f.fail("model_type", "'" + c.model_type + "' does not match architectures '" + c.architecture + "' (model_type " +
                             implied + ")");
  // Attention the roofline and the executors do not model.
  for (const char* mla : {"kv_lora_rank", "q_lora_rank"})
    if (f.has(mla))
      f.fail(mla, "multi-head latent attention (DeepSeek-V2/V3) is not supported; only standard "
                  "multi-head / grouped-query attention");
  const bool sliding = f.boolean("use_sliding_window", false) ||
                       ((c.model_type == "mistral" || c.model_type == "mixtral") && f.has("sliding_window"));
  if (sliding) f.fail("sliding_window", "sliding-window attention is not supported");
}

void read_experts(const Fields& f, ModelConfig& c) {
  MoeConfig& m = c.moe;
  const char* count_key = nullptr;
  for (const char* k : {"num_local_experts", "num_experts", "n_routed_experts"})
    if (f.has(k) && !count_key) count_key = k;
  const bool moe_architecture = c.model_type == "mixtral" || c.model_type == "qwen2_moe" ||
                                c.model_type == "qwen3_moe" || c.model_type == "deepseek";
  if (!count_key || f.integer(count_key) == 0) {  // some dense configs carry num_experts = 0
    if (moe_architecture)
      f.fail(count_key ? count_key : "num_local_experts",
             "model_type " + c.model_type + " is a mixture-of-experts model: give its number of experts");
    return;
  }
  m.num_experts = f.positive(count_key);
  m.experts_per_token = f.positive("num_experts_per_tok");
  if (m.experts_per_token > m.num_experts)
    f.fail("num_experts_per_tok", "exceeds the " + std::to_string(m.num_experts) + " experts");
  // Mixtral's experts are intermediate_size wide; the others name their width.
  m.expert_intermediate =
      std::string(count_key) == "num_local_experts" ? c.intermediate_size : f.positive("moe_intermediate_size");
  if (f.has("n_shared_experts")) {  // DeepSeekMoE
    m.num_shared_experts = f.at_least(f.integer("n_shared_experts"), 0, "n_shared_experts");
    m.shared_intermediate = m.expert_intermediate;
  }
  const int shared = f.at_least(f.integer("shared_expert_intermediate_size", 0), 0,
                                "shared_expert_intermediate_size");  // Qwen2-MoE: one shared expert
  if (shared > 0) m.num_shared_experts = 1, m.shared_intermediate = shared;
  // Which layers are dense.
  if (f.integer("moe_layer_freq", 1) != 1)
    f.fail("moe_layer_freq", "MoE on every n-th layer only is not supported");
  std::vector<bool> dense(static_cast<size_t>(c.num_layers), false);
  const int first_dense = f.integer("first_k_dense_replace", 0);
  if (first_dense < 0 || first_dense > c.num_layers)
    f.fail("first_k_dense_replace", "must be in [0, num_hidden_layers]");
  for (int i = 0; i < first_dense; ++i) dense[i] = true;
  const int step = f.at_least(f.integer("decoder_sparse_step", 1), 1, "decoder_sparse_step");
  for (int i = 0; i < c.num_layers; ++i)
    if ((i + 1) % step != 0) dense[i] = true;
  if (f.has("mlp_only_layers")) {
    const json& layers = f.value("mlp_only_layers");
    if (!layers.is_array()) f.fail("mlp_only_layers", "expected a list of layer indices, got " + describe(layers));
    for (const json& l : layers) {
      const int i = l.is_number() ? f.as_int(l, "mlp_only_layers") : -1;
      if (i < 0 || i >= c.num_layers) f.fail("mlp_only_layers", "must list layer indices in [0, num_hidden_layers)");
      dense[static_cast<size_t>(i)] = true;
    }
  }
  m.num_dense_layers = static_cast<int>(std::count(dense.begin(), dense.end(), true));
}

// The parameter counts in arithmetic type N: int64_t for the API, double when
// parsing, to reject dimensions whose counts would overflow int64_t.
template <class N>
N attention_params_as(const ModelConfig& c) {
  const N h = c.hidden_size, q = N(c.num_heads) * c.head_dim, kv = N(c.num_kv_heads) * c.head_dim;
  return 2 * h * q + 2 * h * kv + 2 * h + (c.qk_norm ? 2 * N(c.head_dim) : N(0));
}

// One MoE layer's MLP parameters: the router, `routed` routed experts, the shared ones.
template <class N>
N moe_mlp_params_as(const ModelConfig& c, int routed) {
  const N h = c.hidden_size;
  return h * c.moe.num_experts + 3 * h * c.moe.expert_intermediate * routed +
         3 * h * N(c.moe.shared_intermediate) * c.moe.num_shared_experts;
}

template <class N>
N num_params_as(const ModelConfig& c) {
  const N h = c.hidden_size;
  const N embed = N(c.vocab_size) * h;
  const N dense_mlp = 3 * h * c.intermediate_size;
  const N layers = N(c.num_layers) * attention_params_as<N>(c) + N(c.num_dense_mlp_layers()) * dense_mlp +
                   (c.moe.enabled() ? N(c.num_moe_layers()) * moe_mlp_params_as<N>(c, c.moe.num_experts) : N(0));
  return embed * (c.tie_word_embeddings ? 1 : 2) + layers + h;
}

// Integer fields the code multiplies: each product must fit where it is kept.
void check_products(const Fields& f, const ModelConfig& c) {
  for (auto [heads, key] : {std::pair<int, const char*>{c.num_heads, "num_attention_heads x head_dim"},
                            {c.num_kv_heads, "num_key_value_heads x head_dim"}}) {
    const int64_t size = int64_t{heads} * c.head_dim;
    if (size > std::numeric_limits<int>::max()) f.fail(key, std::to_string(size) + " does not fit an int");
  }
  // 2^50 parameters (10^15) is far beyond any model and leaves int64_t room for bytes, FLOPs and KV sizes.
  const double params = num_params_as<double>(c);
  if (params > 0x1p50) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", params);
    f.fail("hidden_size, intermediate_size, num_hidden_layers, vocab_size",
           std::string("the model would have ") + text + " parameters, more than 2^50");
  }
}

// The file's text; a directory, a missing file, a device or a file far larger
// than any config.json is an error naming it.
std::string read_text_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ConfigError(path + ": cannot open " + what + (std::filesystem::exists(path, ec) ? " (not a regular file)" : ""));
  if (std::filesystem::file_size(path, ec) > (uintmax_t{64} << 20))
    throw ConfigError(path + ": a " + what + " of more than 64 MiB is not a config.json");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open " + what);
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": cannot read " + what);
  return text.str();
}

}  // namespace

ModelConfig ModelConfig::from_json_file(const std::string& path) {
  ModelConfig cfg = from_json_text(read_text_file(path, "model config"), path);
  cfg.name = std::filesystem::path(path).stem().string();
  return cfg;
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range.406 for a number beyond double (1e400)
    throw ConfigError(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw ConfigError(origin + ": a model config must be a JSON object");
  const Fields f(j, origin);
  ModelConfig c;
  read_architecture(f, c);
  c.hidden_size = f.positive("hidden_size");
  c.intermediate_size = f.positive("intermediate_size");
  c.num_layers = f.positive("num_hidden_layers");
  if (c.num_layers > (1 << 16)) f.fail("num_hidden_layers", std::to_string(c.num_layers) + " is more than 65536");
  c.num_heads = f.positive("num_attention_heads");
  c.num_kv_heads = f.positive("num_key_value_heads", c.num_heads);
  c.vocab_size = f.positive("vocab_size");
  c.max_position_embeddings = f.positive("max_position_embeddings", 2048);
  c.rms_norm_eps = f.positive_number("rms_norm_eps", 1e-5);
  c.rope_theta = f.positive_number("rope_theta", 10000.0);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.initializer_range = f.number("initializer_range", 0.02);
  if (c.initializer_range < 0) f.fail("initializer_range", "must be >= 0");
  c.torch_dtype = f.text("torch_dtype", "bfloat16");
  c.qk_norm = c.model_type == "qwen3" || c.model_type == "qwen3_moe";
  read_experts(f, c);
  if (c.num_heads % c.num_kv_heads != 0)
    f.fail("num_key_value_heads", "num_attention_heads must be a multiple of num_key_value_heads");
  if (c.hidden_size % c.num_heads != 0 && !f.has("head_dim"))
    f.fail("head_dim", "hidden_size is not a multiple of num_attention_heads; give head_dim");
  c.head_dim = f.positive("head_dim", c.hidden_size / c.num_heads);
  if (c.head_dim % 2 != 0) f.fail("head_dim", "must be even for RoPE");
  if (c.dtype_bytes() == 0) f.fail("torch_dtype", "unsupported torch_dtype '" + c.torch_dtype + "'");
  check_products(f, c);

  if (f.has("rope_scaling")) {
    const json& rs_json = f.value("rope_scaling");
    if (!rs_json.is_object()) f.fail("rope_scaling", "expected an object, got " + describe(rs_json));
    const Fields rs(rs_json, origin, "rope_scaling.");
    std::string type = rs.text("rope_type", "");
    if (type.empty()) type = rs.text("type", "");
    if (type == "llama3") {
      RopeScaling& s = c.rope_scaling;
      s.type = type;
      s.factor = rs.positive_number("factor");
      s.low_freq_factor = rs.positive_number("low_freq_factor", 1.0);
      s.high_freq_factor = rs.positive_number("high_freq_factor", 4.0);
      if (!(s.high_freq_factor > s.low_freq_factor)) rs.fail("high_freq_factor", "must exceed low_freq_factor");
      s.original_max_position_embeddings = rs.positive("original_max_position_embeddings", 8192);
    } else if (!type.empty() && type != "default") {
      rs.fail("rope_type", "'" + type + "' is not supported (only llama3)");
    }
  }
  return c;
}

int64_t ModelConfig::attention_params() const { return attention_params_as<int64_t>(*this); }

int64_t ModelConfig::num_layer_params() const {
  if (moe.enabled()) return attention_params() + moe_mlp_params_as<int64_t>(*this, moe.num_experts);
  return attention_params() + 3LL * hidden_size * intermediate_size;
}

int64_t ModelConfig::num_params() const { return num_params_as<int64_t>(*this); }

int64_t ModelConfig::num_active_params() const {
  if (!moe.enabled()) return num_params();
  return num_params() - num_moe_layers() * (moe_mlp_params_as<int64_t>(*this, moe.num_experts) -
                                            moe_mlp_params_as<int64_t>(*this, moe.experts_per_token));
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
