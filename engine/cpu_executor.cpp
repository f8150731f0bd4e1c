#include "engine/cpu_executor.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "engine/common/config_error.h"
#include "engine/flat_batch.h"
#include "engine/kv_cache_manager.h"
#include "engine/model/quantize_weights.h"
#include "engine/sampler.h"
#include "kernels/attention/attention_ref.h"

namespace testbed {

CpuExecutor::CpuExecutor(const ModelConfig& cfg, LlamaWeights weights, int num_blocks, int block_size,
                         int max_model_len)
    : cfg_(cfg), w_(std::move(weights)), rope_(cfg, max_model_len), max_model_len_(max_model_len) {
  layout_.num_blocks = num_blocks;
  layout_.block_size = block_size;
  layout_.num_kv_heads = cfg.num_kv_heads;
  layout_.head_dim = cfg.head_dim;
  k_cache_.assign(cfg.num_layers, std::vector<float>(layout_.num_elements(), 0.0f));
  v_cache_.assign(cfg.num_layers, std::vector<float>(layout_.num_elements(), 0.0f));
  fp8_inputs_ = cfg.precision == "fp8";
  require(!cfg.moe.enabled(), "model.config", cfg.name + " is a mixture-of-experts model: the CPU executor runs dense ones");
}

const float* CpuExecutor::prepare(const float* in, int rows, int k, int layer, int linear) {
  if (observer_) observer_(layer, linear, in, rows, k);
  const std::vector<float>& s = w_.layers[layer].input_scale[linear];
  if (s.empty() && !fp8_inputs_) return in;
  scratch_.assign(in, in + static_cast<size_t>(rows) * k);
  if (!s.empty())
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < k; ++c) scratch_[static_cast<size_t>(r) * k + c] /= s[c];
  if (fp8_inputs_) round_rows_to_fp8(scratch_.data(), rows, k);
  return scratch_.data();
}

void CpuExecutor::run_layers(int T, const int32_t* positions, const std::function<void(int layer)>& attend) {
  const int H = cfg_.hidden_size, Q = cfg_.q_size(), KV = cfg_.kv_size(), I = cfg_.intermediate_size;
  const int d = cfg_.head_dim;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  h_.resize(x_.size());
  q_.resize(static_cast<size_t>(T) * Q);
  k_.resize(static_cast<size_t>(T) * KV);
  v_.resize(static_cast<size_t>(T) * KV);
  attn_.resize(q_.size());
  proj_.resize(x_.size());
  gate_.resize(static_cast<size_t>(T) * I);
  up_.resize(gate_.size());
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    rms_norm(x_.data(), L.attn_norm.data.data(), T, H, eps, h_.data());
    linear(prepare(h_.data(), T, H, l, kLinQ), T, L.wq, q_.data());
    linear(prepare(h_.data(), T, H, l, kLinK), T, L.wk, k_.data());
    linear(prepare(h_.data(), T, H, l, kLinV), T, L.wv, v_.data());
    if (cfg_.qk_norm) {
      rms_norm(q_.data(), L.q_norm.data.data(), T * cfg_.num_heads, d, eps, q_.data());
      rms_norm(k_.data(), L.k_norm.data.data(), T * cfg_.num_kv_heads, d, eps, k_.data());
    }
    for (int t = 0; t < T; ++t) {
      rope_.apply(&q_[static_cast<size_t>(t) * Q], cfg_.num_heads, positions[t]);
      rope_.apply(&k_[static_cast<size_t>(t) * KV], cfg_.num_kv_heads, positions[t]);
    }
    attend(l);
    linear(prepare(attn_.data(), T, Q, l, kLinO), T, L.wo, proj_.data());
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += proj_[i];
    rms_norm(x_.data(), L.mlp_norm.data.data(), T, H, eps, h_.data());
    linear(prepare(h_.data(), T, H, l, kLinGate), T, L.w_gate, gate_.data());
    linear(prepare(h_.data(), T, H, l, kLinUp), T, L.w_up, up_.data());
    silu_mul(gate_.data(), up_.data(), static_cast<int64_t>(gate_.size()), gate_.data());
    linear(prepare(gate_.data(), T, I, l, kLinDown), T, L.w_down, proj_.data());
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += proj_[i];
  }
}

StepResult CpuExecutor::execute(const Batch& batch) {
  const auto t0 = std::chrono::steady_clock::now();
  const int H = cfg_.hidden_size, KV = cfg_.kv_size();
  const int d = cfg_.head_dim, bs = layout_.block_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  const FlatBatch flat = flatten_batch(batch, bs, max_model_len_);
  const int T = flat.num_tokens();
  const std::vector<int32_t>& token_ids = flat.token_ids;
  const std::vector<int32_t>& positions = flat.positions;
  const std::vector<int32_t>& token_seq = flat.row_item;
  const std::vector<int32_t>& indptr = flat.kv_indptr;
  const std::vector<int32_t>& indices = flat.kv_indices;
  PagedKvTable table{indptr.data(), indices.data(), flat.seq_lens.data(), flat.num_items()};

  x_.resize(static_cast<size_t>(T) * H);
  for (int t = 0; t < T; ++t)
    std::memcpy(&x_[static_cast<size_t>(t) * H], &w_.embed.data[static_cast<size_t>(token_ids[t]) * H], sizeof(float) * H);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Each layer's new K/V go into their sequences' blocks; attention reads them back through the block tables.
  run_layers(T, positions.data(), [&](int l) {
    float* kc = k_cache_[l].data();
    float* vc = v_cache_[l].data();
    for (int t = 0; t < T; ++t) {
      const int32_t block = indices[indptr[token_seq[t]] + positions[t] / bs];
      const int slot = positions[t] % bs;
      for (int g = 0; g < cfg_.num_kv_heads; ++g) {
        std::memcpy(kc + layout_.offset(block, g, slot), &k_[static_cast<size_t>(t) * KV + g * d], sizeof(float) * d);
        std::memcpy(vc + layout_.offset(block, g, slot), &v_[static_cast<size_t>(t) * KV + g * d], sizeof(float) * d);
      }
    }
    paged_attention_ref(q_.data(), attn_.data(), T, cfg_.num_heads, token_seq.data(), positions.data(), kc, vc,
                        layout_, table, scale);
  });

  // Logits only for the verified rows: each sampling item's last known token and its drafts.
  const int S = static_cast<int>(flat.logit_rows.size());
  std::vector<float> last(static_cast<size_t>(S) * H);
  for (int i = 0; i < S; ++i)
    std::memcpy(&last[static_cast<size_t>(i) * H], &x_[static_cast<size_t>(flat.logit_rows[i]) * H], sizeof(float) * H);
  rms_norm(last.data(), w_.final_norm.data.data(), S, H, eps, last.data());
  logits_.resize(static_cast<size_t>(S) * cfg_.vocab_size);
  linear(last.data(), S, w_.output_embedding(), logits_.data());
  const int V = cfg_.vocab_size;
  StepResult result;
  sample_verified(batch, flat.logit_indptr, V, [&](int row) { return &logits_[static_cast<size_t>(row) * V]; },
                  nullptr, result);
  result.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

bool CpuExecutor::embed(const std::vector<int32_t>& prompt, std::vector<float>& out) {
  const int T = static_cast<int>(prompt.size()), H = cfg_.hidden_size;
  if (T == 0) throw std::invalid_argument("CpuExecutor::embed: empty prompt");
  if (T > max_model_len_ || T > rope_.max_positions())
    throw std::invalid_argument("CpuExecutor::embed: prompt of " + std::to_string(T) + " tokens is longer than " +
                                std::to_string(max_model_len_));
  x_.resize(static_cast<size_t>(T) * H);
  for (int t = 0; t < T; ++t) {
    if (prompt[t] < 0 || prompt[t] >= cfg_.vocab_size)
      throw std::invalid_argument("CpuExecutor::embed: token " + std::to_string(prompt[t]) + " outside the vocabulary");
    std::memcpy(&x_[static_cast<size_t>(t) * H], &w_.embed.data[static_cast<size_t>(prompt[t]) * H], sizeof(float) * H);
  }
  // The prompt's K/V go into scratch blocks of its own (blocks 0.. in order,
  // one layer at a time), read by the same paged attention a step runs: the
  // hidden states are those the engine's prefill of this prompt computes
  // (batch-invariant ops), and the paged cache is never touched.
  const int d = cfg_.head_dim, KV = cfg_.kv_size();
  KvLayout scratch = layout_;
  scratch.num_blocks = (T + scratch.block_size - 1) / scratch.block_size;
  embed_k_.resize(scratch.num_elements());
  embed_v_.resize(scratch.num_elements());
  std::vector<int32_t> positions(T), token_seq(T, 0), indices(scratch.num_blocks);
  for (int t = 0; t < T; ++t) positions[t] = t;
  for (int b = 0; b < scratch.num_blocks; ++b) indices[b] = b;
  const int32_t indptr[2] = {0, scratch.num_blocks}, seq_len = T;
  const PagedKvTable table{indptr, indices.data(), &seq_len, 1};
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  run_layers(T, positions.data(), [&](int) {
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < cfg_.num_kv_heads; ++g) {
        const size_t at = scratch.offset(t / scratch.block_size, g, t % scratch.block_size);
        std::memcpy(&embed_k_[at], &k_[static_cast<size_t>(t) * KV + g * d], sizeof(float) * d);
        std::memcpy(&embed_v_[at], &v_[static_cast<size_t>(t) * KV + g * d], sizeof(float) * d);
      }
    paged_attention_ref(q_.data(), attn_.data(), T, cfg_.num_heads, token_seq.data(), positions.data(),
                        embed_k_.data(), embed_v_.data(), scratch, table, scale);
  });
  rms_norm(x_.data(), w_.final_norm.data.data(), T, H, static_cast<float>(cfg_.rms_norm_eps), h_.data());
  std::vector<double> sum(H, 0.0);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < H; ++i) sum[i] += h_[static_cast<size_t>(t) * H + i];
  out.resize(H);
  for (int i = 0; i < H; ++i) out[i] = static_cast<float>(sum[i] / T);
  return true;
}

KvBlockData CpuExecutor::read_kv_blocks(const std::vector<int32_t>& blocks) const {
  const size_t block_floats = layout_.block_stride();
  KvBlockData data;
  data.num_blocks = static_cast<int>(blocks.size());
  data.bytes.resize(blocks.size() * cfg_.num_layers * 2 * block_floats * sizeof(float));
  float* out = reinterpret_cast<float*>(data.bytes.data());
  for (int32_t b : blocks)
    for (int l = 0; l < cfg_.num_layers; ++l)
      for (const auto* cache : {&k_cache_[l], &v_cache_[l]}) {
        std::memcpy(out, cache->data() + layout_.offset(b, 0, 0), block_floats * sizeof(float));
        out += block_floats;
      }
  return data;
}

void CpuExecutor::write_kv_blocks(const std::vector<int32_t>& blocks, const KvBlockData& data) {
  const size_t block_floats = layout_.block_stride();
  if (data.num_blocks != static_cast<int>(blocks.size()) ||
      data.bytes.size() != blocks.size() * cfg_.num_layers * 2 * block_floats * sizeof(float))
    throw std::logic_error("CpuExecutor::write_kv_blocks: the data does not hold " + std::to_string(blocks.size()) +
                           " blocks of this model's KV layout");
  const float* in = reinterpret_cast<const float*>(data.bytes.data());
  for (int32_t b : blocks)
    for (int l = 0; l < cfg_.num_layers; ++l)
      for (auto* cache : {&k_cache_[l], &v_cache_[l]}) {
        std::memcpy(cache->data() + layout_.offset(b, 0, 0), in, block_floats * sizeof(float));
        in += block_floats;
      }
}

LlamaWeights quantized_weights(const ModelConfig& cfg, LlamaWeights w, int block_size) {
  if (cfg.precision.empty() || !w.quantized_format.empty()) return w;  // a quantized checkpoint is used as stored
  if (cfg.precision == "w4a16" && cfg.quant_method != "rtn") {
    // Calibration: the unquantized model over calibration_tokens(), every linear's input recorded.
    ModelConfig plain = cfg;
    plain.precision.clear();
    // More calibration rows than any linear has inputs (GPTQ's H must be well conditioned).
    const int n = std::min(2048, std::max(16, cfg.max_position_embeddings - 1));
    const int blocks = (n + block_size - 1) / block_size;
    CpuExecutor exec(plain, w, blocks, block_size, n + 1);
    CalibrationInputs calib;
    exec.set_linear_observer([&](int layer, int linear, const float* in, int rows, int k) {
      std::vector<float>& v = calib[{layer, linear}];
      v.insert(v.end(), in, in + static_cast<size_t>(rows) * k);
    });
    KvCacheManager kv(blocks, block_size, false);
    Request r;
    r.prompt = calibration_tokens(cfg.vocab_size, n, 0xCA11B);
    Sequence seq(std::move(r));
    if (!kv.allocate(seq, n)) throw std::logic_error("calibration: no KV room");
    Batch b;
    b.add(&seq, 0, n);
    exec.execute(b);
    quantize_linear_weights(cfg, w, &calib);
    return w;
  }
  quantize_linear_weights(cfg, w, nullptr);
  return w;
}

TESTBED_REGISTER(ExecutorRegistry, "cpu", [](const ExecutorSetup& s) -> std::unique_ptr<Executor> {
  return std::make_unique<CpuExecutor>(
      s.model, quantized_weights(s.model, load_weights(s.model, s.weights, s.weights_seed), s.block_size), s.num_blocks,
      s.block_size, s.max_model_len);
});

}  // namespace testbed
