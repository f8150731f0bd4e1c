#include "engine/model/quantized_checkpoint.h"

#include <cmath>
#include <cstring>

#include "engine/common/config_error.h"
#include "engine/model/float16.h"
#include "engine/model/safetensors.h"
#include "kernels/gemm/gemm_ref.h"

namespace testbed {
namespace {

std::vector<int32_t> as_i32(const std::vector<uint8_t>& raw) {
  std::vector<int32_t> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), v.size() * 4);
  return v;
}

// A scale tensor [rows, cols] as floats (F16, BF16 or F32).
std::vector<float> scales_of(const SafetensorsFile& f, const std::string& name, int64_t rows, int64_t cols) {
  return f.read(name, {rows, cols}).data;
}

const int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // column j % 8 sits in nibble kAwqNibble[j % 8]

}  // namespace

LlamaWeights load_checkpoint(const ModelConfig& cfg, const std::string& path, std::string* format) {
  SafetensorsFile file(path);
  LlamaWeights w;
  std::string seen;
  auto note = [&](const std::string& f, const std::string& prefix) {
    if (!seen.empty() && seen != f)
      throw ConfigError(path + ": tensor '" + prefix + "' is " + f + " but others are " + seen);
    seen = f;
  };
  int layer = -1, linear_index = 0;  // for_each_weight visits each layer's linears in q k v o gate up down order
  for_each_weight(cfg, w, [&](const std::string& name, Tensor& t, const std::vector<int64_t>& shape, bool) {
    if (name.find("input_layernorm") != std::string::npos) ++layer, linear_index = 0;
    const std::string suffix = ".weight";
    const bool linear = name.size() > 12 && name.compare(name.size() - 12, 12, "_proj.weight") == 0;
    const std::string prefix = name.substr(0, name.size() - suffix.size());
    if (!linear) {
      t = file.read(name, shape);
      return;
    }
    const int64_t n = shape[0], k = shape[1];
    t.shape = shape;
    t.data.assign(static_cast<size_t>(n * k), 0.0f);
    LayerWeights& L = w.layers[layer];
    const int li = linear_index++;
    if (file.contains(prefix + ".qweight")) {
      const std::vector<int64_t> qs = file.shape_of(prefix + ".qweight");
      // Both pack qzeros eight to a word along N, so N must be a multiple of 8 for either.
      const bool gptq = qs == std::vector<int64_t>{k / 8, n} && k % 8 == 0 && n % 8 == 0;
      const bool awq = qs == std::vector<int64_t>{k, n / 8} && n % 8 == 0;
      if (!gptq && !awq)
        throw ConfigError(path + ": tensor '" + prefix + ".qweight' has a shape neither GPTQ's [K/8, N] nor AWQ's [K, N/8]");
      note(gptq ? "gptq" : "awq", prefix);
      const std::vector<int64_t> ss = file.shape_of(prefix + ".scales");
      if (ss.size() != 2 || ss[1] != n || ss[0] <= 0 || k % ss[0] != 0)
        throw ConfigError(path + ": tensor '" + prefix + ".scales' must be [K/group, N]");
      const int64_t groups = ss[0], g = k / groups;
      const std::vector<float> scales = scales_of(file, prefix + ".scales", groups, n);
      const std::vector<int32_t> q = as_i32(file.read_raw(prefix + ".qweight", {"I32"}, qs));
      const std::vector<int32_t> z = as_i32(file.read_raw(prefix + ".qzeros", {"I32"}, {groups, n / 8}));
      std::vector<int32_t> g_idx(k);
      for (int64_t c = 0; c < k; ++c) g_idx[c] = static_cast<int32_t>(c / g);
      if (gptq && file.contains(prefix + ".g_idx")) {
        g_idx = as_i32(file.read_raw(prefix + ".g_idx", {"I32"}, {k}));
        for (int32_t v : g_idx)
          if (v < 0 || v >= groups) throw ConfigError(path + ": tensor '" + prefix + ".g_idx' names a group out of range");
      }
      // Groups in column order (no act-order g_idx): the W4A16 kernel's layout holds, keep the codes for it.
      bool contiguous = g == 32 || g == 64 || g == 128;
      for (int64_t c = 0; c < k && contiguous; ++c) contiguous = g_idx[c] == c / g;
      W4Weights q4;
      if (contiguous) {
        q4.n = static_cast<int>(n);
        q4.k = static_cast<int>(k);
        q4.group = static_cast<int>(g);
        q4.qweight.assign(static_cast<size_t>(n * (k / 8)), 0u);
        q4.scales.assign(static_cast<size_t>(n * groups), 0.0f);
        q4.zeros.assign(static_cast<size_t>(n * groups), 0);
      }
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c) {
          const int64_t grp = g_idx[c];
          int code, zero;
          if (gptq) {
            code = (static_cast<uint32_t>(q[(c / 8) * n + r]) >> (4 * (c % 8))) & 0xF;
            zero = ((static_cast<uint32_t>(z[grp * (n / 8) + r / 8]) >> (4 * (r % 8))) & 0xF) + 1;
          } else {
            code = (static_cast<uint32_t>(q[c * (n / 8) + r / 8]) >> (4 * kAwqNibble[r % 8])) & 0xF;
            zero = (static_cast<uint32_t>(z[grp * (n / 8) + r / 8]) >> (4 * kAwqNibble[r % 8])) & 0xF;
          }
          t.data[static_cast<size_t>(r * k + c)] = static_cast<float>(code - zero) * scales[static_cast<size_t>(grp * n + r)];
          if (contiguous) {
            if (zero > 15) contiguous = false;  // a GPTQ zero of 16: outside the kernel's 4-bit zeros
            q4.qweight[static_cast<size_t>(r * (k / 8) + c / 8)] |= static_cast<uint32_t>(code) << (4 * (c % 8));
            q4.scales[static_cast<size_t>(r * groups + grp)] = scales[static_cast<size_t>(grp * n + r)];
            q4.zeros[static_cast<size_t>(r * groups + grp)] = static_cast<uint8_t>(zero & 0xF);
          }
        }
      if (contiguous) L.q4[li] = std::move(q4);
      return;
    }
    if (file.contains(name) && file.dtype_of(name) == "F8_E4M3") {
      note("fp8", prefix);
      const std::vector<uint8_t> codes = file.read_raw(name, {"F8_E4M3"}, shape);
      const std::vector<int64_t> ss = file.shape_of(prefix + ".weight_scale");
      const bool per_tensor = ss.empty() || ss == std::vector<int64_t>{1};
      if (!per_tensor && ss != std::vector<int64_t>{n} && ss != std::vector<int64_t>{n, 1})
        throw ConfigError(path + ": tensor '" + prefix + ".weight_scale' must be [], [1], [N] or [N, 1]");
      const std::vector<uint8_t> raw = file.read_raw(prefix + ".weight_scale", {"F32"}, ss);
      std::vector<float> s(raw.size() / 4);
      std::memcpy(s.data(), raw.data(), raw.size());
      for (float v : s)
        if (!std::isfinite(v))
          throw ConfigError(path + ": tensor '" + prefix + ".weight_scale' holds " + std::to_string(v) +
                            " (scales must be finite)");
      for (size_t i = 0; i < codes.size(); ++i)
        if ((codes[i] & 0x7F) == 0x7F)  // e4m3's only NaN codes (it has no infinity)
          throw ConfigError(path + ": tensor '" + name + "' holds an e4m3 NaN code at element " + std::to_string(i));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c)
          t.data[static_cast<size_t>(r * k + c)] = e4m3_to_float(codes[static_cast<size_t>(r * k + c)]) * s[per_tensor ? 0 : r];
      L.f8_codes[li] = codes;
      L.f8_scales[li].assign(static_cast<size_t>(n), 0.0f);
      for (int64_t r = 0; r < n; ++r) L.f8_scales[li][r] = s[per_tensor ? 0 : r];
      return;
    }
    t = file.read(name, shape);
  });
  if (format) *format = seen;
  return w;
}

}  // namespace testbed
