#include "sim/memory_planner.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>

#include "engine/common/config_error.h"

namespace testbed {

void check_tp_split(const ModelConfig& m, int tp) {
  require(tp >= 1, "cost_model.tensor_parallel", "must be >= 1");
  require(m.num_heads % tp == 0, "cost_model.tensor_parallel",
          std::to_string(tp) + " does not divide the " + std::to_string(m.num_heads) + " attention heads of " +
              m.name);
  require(m.num_kv_heads % tp == 0 || tp % m.num_kv_heads == 0, "cost_model.tensor_parallel",
          std::to_string(tp) + " neither divides nor is a multiple of the " + std::to_string(m.num_kv_heads) +
              " KV heads of " + m.name);
}

TpSplit tp_split(const ModelConfig& m, int tp) {
  TpSplit s;
  s.layers = m.num_layers;
  s.hidden = m.hidden_size;
  s.q_heads = static_cast<double>(m.num_heads) / tp;
  s.kv_heads = m.num_kv_heads >= tp ? static_cast<double>(m.num_kv_heads) / tp : 1.0;
  s.head_dim = m.head_dim;
  s.inter = static_cast<double>(m.intermediate_size) / tp;
  s.vocab = static_cast<double>(m.vocab_size) / tp;
  return s;
}

int activation_bytes(const ModelConfig& model) { return std::max(model.dtype_bytes(), 2); }

double weight_bytes_per_gpu(const ModelConfig& m, int tp) {
  check_tp_split(m, tp);
  const TpSplit s = tp_split(m, tp);
  const double h = s.hidden, d = s.head_dim;
  const double attention = h * (s.q_heads + 2 * s.kv_heads) * d + s.q_heads * d * h + 2 * h + (m.qk_norm ? 2 * d : 0);
  const double dense_mlp = 3 * h * s.inter;
  // A MoE layer holds every expert, each split TP ways like a dense MLP, and a replicated router.
  const MoeConfig& e = m.moe;
  const double moe_mlp = e.enabled() ? h * e.num_experts + 3 * h * (static_cast<double>(e.num_experts) * e.expert_intermediate +
                                                                    static_cast<double>(e.num_shared_experts) * e.shared_intermediate) / tp
                                     : 0.0;
  const double embed = s.vocab * h * (m.tie_word_embeddings ? 1 : 2);
  // The linear layers at the model's precision; norms, router, embeddings and LM head 16-bit.
  const double norms = 2 * h + (m.qk_norm ? 2 * d : 0), router = e.enabled() ? h * e.num_experts : 0.0;
  const double linear = s.layers * (attention - norms) + m.num_dense_mlp_layers() * dense_mlp +
                        m.num_moe_layers() * (moe_mlp - router);
  const double other = s.layers * norms + m.num_moe_layers() * router + embed + h;
  return linear * m.linear_weight_bytes() + other * m.other_weight_bytes();
}

double kv_bytes_per_token_per_gpu(const ModelConfig& m, int tp) {
  check_tp_split(m, tp);
  const TpSplit s = tp_split(m, tp);
  return 2 * s.layers * s.kv_heads * s.head_dim * activation_bytes(m);
}

int kv_blocks_from_memory(const HardwareSpec& hw, const ModelConfig& model, int block_size, double fraction,
                          int tensor_parallel, const ModelConfig* draft) {
  require(block_size >= 1, "cache.block_size", "must be >= 1");
  require(std::isfinite(fraction) && fraction > 0 && fraction <= 1, "cache.gpu_memory_fraction", "must be in (0, 1]");
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double weights =
      weight_bytes_per_gpu(model, tensor_parallel) + (draft ? weight_bytes_per_gpu(*draft, tensor_parallel) : 0.0);
  const double budget = hw.memory_bytes() * fraction - hw.reserve_gib * gib;
  const double per_block = block_size * (kv_bytes_per_token_per_gpu(model, tensor_parallel) +
                                         (draft ? kv_bytes_per_token_per_gpu(*draft, tensor_parallel) : 0.0));
  const double blocks = std::floor((budget - weights) / per_block);
  if (blocks < 1) {
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "no room left for KV: %.3g x %.1f GiB of %s minus a %.1f GiB reserve is %.1f GiB per GPU, "
                  "but the weights of %s at tensor_parallel %d take %.1f GiB per GPU (raise the fraction or "
                  "tensor_parallel)",
                  fraction, hw.memory_gib, hw.name.c_str(), hw.reserve_gib,
                  budget / gib, model.name.c_str(), tensor_parallel, weights / gib);
    throw ConfigError(std::string("cache.gpu_memory_fraction: ") + msg);
  }
  return blocks > INT_MAX ? INT_MAX : static_cast<int>(blocks);
}

}  // namespace testbed
