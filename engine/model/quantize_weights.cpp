#include "engine/model/quantize_weights.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/common/config_error.h"
#include "engine/common/rng.h"
#include "kernels/gemm/gemm_ref.h"
#include "kernels/gemm/quantize_ref.h"

namespace testbed {
namespace {

Tensor* linear_of(LayerWeights& L, int i) {
  Tensor* t[kNumLinears] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down};
  return t[i];
}

}  // namespace

void round_rows_to_fp8(float* x, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<size_t>(r) * cols;
    const float s = fp8_scale_from_amax(row, static_cast<size_t>(cols));
    for (int c = 0; c < cols; ++c) row[c] = e4m3_to_float(float_to_e4m3(row[c] / s)) * s;
  }
}

void quantize_linear_weights(const ModelConfig& cfg, LlamaWeights& w, const CalibrationInputs* calib) {
  if (cfg.precision.empty()) return;
  require(cfg.precision == "fp8" || cfg.precision == "w4a16", "model.precision", "'" + cfg.precision + "' is not fp8 or w4a16");
  const std::string& method = cfg.quant_method;
  require(cfg.precision == "fp8" || method == "rtn" || method == "gptq" || method == "awq", "model.quantization",
          "'" + method + "' is not rtn, gptq or awq");
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& L = w.layers[l];
    if (cfg.precision == "w4a16" && method == "awq") {
      // AWQ scales each group of linears that reads one input with one scale: q, k, v; o; gate, up; down.
      require(calib != nullptr, "model.quantization", "awq needs calibration inputs");
      for (const std::vector<int>& grp : {std::vector<int>{kLinQ, kLinK, kLinV}, std::vector<int>{kLinO},
                                          std::vector<int>{kLinGate, kLinUp}, std::vector<int>{kLinDown}}) {
        std::vector<const float*> ws;
        std::vector<int> ns;
        const int k = static_cast<int>(linear_of(L, grp[0])->shape[1]);
        require(k % cfg.quant_group_size == 0, "model.quant_group_size",
                std::to_string(cfg.quant_group_size) + " does not divide the " + std::to_string(k) +
                    " input features of layer " + std::to_string(l) + "'s linears");
        for (int i : grp) {
          ws.push_back(linear_of(L, i)->data.data());
          ns.push_back(static_cast<int>(linear_of(L, i)->shape[0]));
        }
        const auto it = calib->find({static_cast<int>(l), grp[0]});
        require(it != calib->end() && !it->second.empty(), "model.quantization", "no calibration inputs for layer " + std::to_string(l));
        AwqGroupResult a = quantize_w4_awq_group(ws, ns, k, it->second.data(), static_cast<int>(it->second.size() / k),
                                                 cfg.quant_group_size, false);
        for (size_t j = 0; j < grp.size(); ++j) {
          linear_of(L, grp[j])->data = dequantize_w4(a.weights[j]);
          L.q4[grp[j]] = std::move(a.weights[j]);
          L.input_scale[grp[j]] = a.input_scale;
        }
      }
      continue;
    }
    for (int i = 0; i < kNumLinears; ++i) {
      Tensor& t = *linear_of(L, i);
      const int n = static_cast<int>(t.shape[0]), k = static_cast<int>(t.shape[1]);
      if (cfg.precision == "fp8") {
        const std::vector<float> s = fp8_scales_per_row(t.data.data(), n, k);
        const std::vector<uint8_t> q = quantize_fp8(t.data.data(), n, k, s);
        for (int r = 0; r < n; ++r)
          for (int c = 0; c < k; ++c) t.data[static_cast<size_t>(r) * k + c] = e4m3_to_float(q[static_cast<size_t>(r) * k + c]) * s[r];
        L.f8_codes[i] = q;
        L.f8_scales[i] = s;
        continue;
      }
      require(k % cfg.quant_group_size == 0, "model.quant_group_size",
              std::to_string(cfg.quant_group_size) + " does not divide the " + std::to_string(k) +
                  " input features of layer " + std::to_string(l) + "'s linears");
      W4Weights q;
      if (method == "rtn") {
        q = quantize_w4_rtn(t.data.data(), n, k, cfg.quant_group_size, false);
      } else {
        require(calib != nullptr, "model.quantization", method + " needs calibration inputs");
        const auto it = calib->find({static_cast<int>(l), i});
        require(it != calib->end() && !it->second.empty(), "model.quantization", "no calibration inputs for layer " + std::to_string(l));
        const int samples = static_cast<int>(it->second.size() / k);
        q = quantize_w4_gptq(t.data.data(), n, k, it->second.data(), samples, cfg.quant_group_size, false);
      }
      t.data = dequantize_w4(q);
      L.q4[i] = std::move(q);
    }
  }
}

std::vector<int32_t> calibration_tokens(int vocab_size, int n, uint64_t seed) {
  // One rank -> id map for every seed: like text, all sequences share their frequent tokens.
  Rng order(0x21FF);
  std::vector<int32_t> id_of_rank(vocab_size);
  std::iota(id_of_rank.begin(), id_of_rank.end(), 0);
  for (size_t i = id_of_rank.size() - 1; i > 0; --i) std::swap(id_of_rank[i], id_of_rank[order.below(i + 1)]);
  Rng rng(seed);
  std::vector<double> cdf(vocab_size);
  double sum = 0;
  for (int r = 0; r < vocab_size; ++r) cdf[r] = (sum += 1.0 / (r + 1));
  std::vector<int32_t> out(n);
  for (int32_t& t : out) {
    const double u = rng.uniform() * sum;
    const int r = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    t = id_of_rank[std::min(r, vocab_size - 1)];
  }
  return out;
}

}  // namespace testbed
