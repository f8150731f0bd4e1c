#include "engine/cpu_executor.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/sampler.h"
#include "kernels/attention/attention_ref.h"

namespace testbed {

CpuExecutor::CpuExecutor(const ModelConfig& cfg, LlamaWeights weights, int num_blocks, int block_size,
                         int max_model_len)
    : cfg_(cfg), w_(std::move(weights)), rope_(cfg, max_model_len) {
  layout_.num_blocks = num_blocks;
  layout_.block_size = block_size;
  layout_.num_kv_heads = cfg.num_kv_heads;
  layout_.head_dim = cfg.head_dim;
  k_cache_.assign(cfg.num_layers, std::vector<float>(layout_.num_elements(), 0.0f));
  v_cache_.assign(cfg.num_layers, std::vector<float>(layout_.num_elements(), 0.0f));
}

StepResult CpuExecutor::execute(const Batch& batch) {
  const auto t0 = std::chrono::steady_clock::now();
  const int H = cfg_.hidden_size, Q = cfg_.q_size(), KV = cfg_.kv_size(), I = cfg_.intermediate_size;
  const int d = cfg_.head_dim, bs = layout_.block_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  // Flatten the batch: one row per new token, and the CSR block table.
  std::vector<int32_t> token_ids, positions, token_seq, indptr{0}, indices, seq_lens;
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const ScheduledSeq& item = batch.items[s];
    const Sequence& seq = *item.seq;
    for (int p = item.num_computed; p < item.num_computed + item.num_new; ++p) {
      token_ids.push_back(seq.tokens()[p]);
      positions.push_back(p);
      token_seq.push_back(s);
    }
    indices.insert(indices.end(), seq.block_table.begin(), seq.block_table.end());
    indptr.push_back(static_cast<int32_t>(indices.size()));
    seq_lens.push_back(item.num_computed + item.num_new);
  }
  const int T = static_cast<int>(token_ids.size());
  PagedKvTable table{indptr.data(), indices.data(), seq_lens.data(), batch.num_seqs()};

  x_.resize(static_cast<size_t>(T) * H);
  for (int t = 0; t < T; ++t)
    std::memcpy(&x_[static_cast<size_t>(t) * H], &w_.embed.data[static_cast<size_t>(token_ids[t]) * H], sizeof(float) * H);
  h_.resize(x_.size());
  q_.resize(static_cast<size_t>(T) * Q);
  k_.resize(static_cast<size_t>(T) * KV);
  v_.resize(static_cast<size_t>(T) * KV);
  attn_.resize(q_.size());
  proj_.resize(x_.size());
  gate_.resize(static_cast<size_t>(T) * I);
  up_.resize(gate_.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    rms_norm(x_.data(), L.attn_norm.data.data(), T, H, eps, h_.data());
    linear(h_.data(), T, L.wq, q_.data());
    linear(h_.data(), T, L.wk, k_.data());
    linear(h_.data(), T, L.wv, v_.data());
    if (cfg_.qk_norm) {
      rms_norm(q_.data(), L.q_norm.data.data(), T * cfg_.num_heads, d, eps, q_.data());
      rms_norm(k_.data(), L.k_norm.data.data(), T * cfg_.num_kv_heads, d, eps, k_.data());
    }
    float* kc = k_cache_[l].data();
    float* vc = v_cache_[l].data();
    for (int t = 0; t < T; ++t) {
      rope_.apply(&q_[static_cast<size_t>(t) * Q], cfg_.num_heads, positions[t]);
      rope_.apply(&k_[static_cast<size_t>(t) * KV], cfg_.num_kv_heads, positions[t]);
      const int32_t block = indices[indptr[token_seq[t]] + positions[t] / bs];
      const int slot = positions[t] % bs;
      for (int g = 0; g < cfg_.num_kv_heads; ++g) {
        std::memcpy(kc + layout_.offset(block, g, slot), &k_[static_cast<size_t>(t) * KV + g * d], sizeof(float) * d);
        std::memcpy(vc + layout_.offset(block, g, slot), &v_[static_cast<size_t>(t) * KV + g * d], sizeof(float) * d);
      }
    }
    paged_attention_ref(q_.data(), attn_.data(), T, cfg_.num_heads, token_seq.data(), positions.data(), kc, vc,
                        layout_, table, scale);
    linear(attn_.data(), T, L.wo, proj_.data());
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += proj_[i];
    rms_norm(x_.data(), L.mlp_norm.data.data(), T, H, eps, h_.data());
    linear(h_.data(), T, L.w_gate, gate_.data());
    linear(h_.data(), T, L.w_up, up_.data());
    silu_mul(gate_.data(), up_.data(), static_cast<int64_t>(gate_.size()), gate_.data());
    linear(gate_.data(), T, L.w_down, proj_.data());
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += proj_[i];
  }

  // Logits only for the rows that sample: each sampling item's last token.
  StepResult result;
  result.tokens.assign(batch.num_seqs(), -1);
  std::vector<int> sample_rows, sample_items;
  for (int s = 0, row = 0; s < batch.num_seqs(); ++s) {
    row += batch.items[s].num_new;
    if (batch.items[s].samples()) {
      sample_rows.push_back(row - 1);
      sample_items.push_back(s);
    }
  }
  const int S = static_cast<int>(sample_rows.size());
  std::vector<float> last(static_cast<size_t>(S) * H);
  for (int i = 0; i < S; ++i)
    std::memcpy(&last[static_cast<size_t>(i) * H], &x_[static_cast<size_t>(sample_rows[i]) * H], sizeof(float) * H);
  rms_norm(last.data(), w_.final_norm.data.data(), S, H, eps, last.data());
  logits_.resize(static_cast<size_t>(S) * cfg_.vocab_size);
  linear(last.data(), S, w_.output_embedding(), logits_.data());
  for (int i = 0; i < S; ++i) {
    const ScheduledSeq& item = batch.items[sample_items[i]];
    result.tokens[sample_items[i]] = sample_token(&logits_[static_cast<size_t>(i) * cfg_.vocab_size], cfg_.vocab_size,
                                                  item.seq->request().sampling, item.seq->id(), item.seq->num_tokens());
  }
  result.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace testbed
