#include "engine/cuda/device_model.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "engine/model/cpu_ops.h"
#include "engine/model/float16.h"

namespace testbed {
namespace {

// Concatenates the rows of `parts` (same column count) into one bf16 matrix.
DeviceBuffer upload_bf16(const std::vector<const Tensor*>& parts) {
  std::vector<uint16_t> host;
  for (const Tensor* t : parts) {
    if (t->empty()) throw std::invalid_argument("CUDA executor: a weight tensor is empty");
    host.reserve(host.size() + t->data.size());
    for (float v : t->data) host.push_back(float_to_bf16(v));
  }
  DeviceBuffer buf;
  buf.upload(host);
  return buf;
}

DeviceW4 upload_w4(const std::vector<const W4Weights*>& parts) {
  DeviceW4 d;
  std::vector<uint32_t> q;
  std::vector<uint16_t> s;
  std::vector<uint8_t> z;
  for (const W4Weights* p : parts) {
    if (p->n == 0) throw std::invalid_argument("CUDA executor: a w4a16 weight has no codes (AWQ and checkpoints are CPU-only)");
    if (d.n > 0 && (p->k != d.k || p->group != d.group)) throw std::invalid_argument("CUDA executor: fused w4a16 parts differ");
    d.k = p->k;
    d.group = p->group;
    d.n += p->n;
    q.insert(q.end(), p->qweight.begin(), p->qweight.end());
    for (float v : p->scales) s.push_back(float_to_bf16(v));
    if (p->symmetric())
      z.insert(z.end(), p->scales.size(), 8);
    else
      z.insert(z.end(), p->zeros.begin(), p->zeros.end());
  }
  d.qweight.upload(q);
  d.scales.upload(s);
  d.zeros.upload(z);
  return d;
}

DeviceF8 upload_f8(const LayerWeights& L, std::initializer_list<int> parts) {
  DeviceF8 d;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  for (int i : parts) {
    if (L.f8_codes[i].empty()) throw std::invalid_argument("CUDA executor: an fp8 weight has no codes (FP8 checkpoints are CPU-only)");
    const int n = static_cast<int>(L.f8_scales[i].size()), k = static_cast<int>(L.f8_codes[i].size() / n);
    if (d.n > 0 && k != d.k) throw std::invalid_argument("CUDA executor: fused fp8 parts differ");
    d.k = k;
    d.n += n;
    codes.insert(codes.end(), L.f8_codes[i].begin(), L.f8_codes[i].end());
    scales.insert(scales.end(), L.f8_scales[i].begin(), L.f8_scales[i].end());
  }
  d.codes.upload(codes);
  d.scales.upload(scales);
  return d;
}

DeviceBuffer upload_f32(const Tensor& t) {
  DeviceBuffer buf;
  buf.upload(t.data);
  return buf;
}

}  // namespace

DeviceModel upload_model(const ModelConfig& cfg, const LlamaWeights& w, int max_positions) {
  DeviceModel m;
  m.embed = upload_bf16({&w.embed});
  if (!w.lm_head.empty()) m.lm_head = upload_bf16({&w.lm_head});
  m.final_norm = upload_f32(w.final_norm);
  m.layers.resize(cfg.num_layers);
  for (int l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    DeviceLayer& D = m.layers[l];
    D.attn_norm = upload_f32(L.attn_norm);
    if (cfg.precision == "w4a16") {
      D.q_qkv = upload_w4({&L.q4[0], &L.q4[1], &L.q4[2]});
      D.q_o = upload_w4({&L.q4[3]});
      D.q_gate_up = upload_w4({&L.q4[4], &L.q4[5]});
      D.q_down = upload_w4({&L.q4[6]});
      auto inverse = [](const std::vector<float>& s) {
        DeviceBuffer b;
        if (s.empty()) return b;
        std::vector<float> inv(s.size());
        for (size_t i = 0; i < s.size(); ++i) inv[i] = 1.0f / s[i];
        b.upload(inv);
        return b;
      };
      // AWQ scales one input per group of GEMMs (q, k, v share one; gate and up another).
      if (L.input_scale[0] != L.input_scale[1] || L.input_scale[0] != L.input_scale[2] ||
          L.input_scale[4] != L.input_scale[5])
        throw std::invalid_argument("CUDA executor: fused GEMMs need one AWQ input scale per group");
      D.inv_qkv = inverse(L.input_scale[0]);
      D.inv_o = inverse(L.input_scale[3]);
      D.inv_gate_up = inverse(L.input_scale[4]);
      D.inv_down = inverse(L.input_scale[6]);
    } else if (cfg.precision == "fp8") {
      D.f_qkv = upload_f8(L, {0, 1, 2});
      D.f_o = upload_f8(L, {3});
      D.f_gate_up = upload_f8(L, {4, 5});
      D.f_down = upload_f8(L, {6});
    } else {
      D.w_qkv = upload_bf16({&L.wq, &L.wk, &L.wv});
      D.w_o = upload_bf16({&L.wo});
      D.w_gate_up = upload_bf16({&L.w_gate, &L.w_up});
      D.w_down = upload_bf16({&L.w_down});
    }
    if (cfg.qk_norm) {
      D.q_norm = upload_f32(L.q_norm);
      D.k_norm = upload_f32(L.k_norm);
    }
    D.mlp_norm = upload_f32(L.mlp_norm);
  }
  // The same values as RopeTable: angles in double, rounded once to float.
  const std::vector<double> inv = rope_inverse_frequencies(cfg);
  const int half = cfg.head_dim / 2;
  std::vector<float> cos_t(static_cast<size_t>(max_positions) * half), sin_t(cos_t.size());
  for (int p = 0; p < max_positions; ++p)
    for (int i = 0; i < half; ++i) {
      const double angle = p * inv[i];
      cos_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(angle));
      sin_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(angle));
    }
  m.rope_cos.upload(cos_t);
  m.rope_sin.upload(sin_t);
  return m;
}

}  // namespace testbed
