// The model's weights on the device: projections in bf16 (q/k/v and gate/up
// fused into one matrix each, so a layer runs four GEMMs), norms in fp32, and
// the RoPE cos/sin tables built on the host with rope_inverse_frequencies, the
// same numbers the CPU executor's RopeTable holds.
#pragma once

#include <vector>

#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"
#include "kernels/common/device_buffer.h"

namespace testbed {

// A linear layer's int4 weights on the device, in kernels/gemm/gemm.h's layout
// (rows of several matrices concatenated, as the fused bf16 ones are).
struct DeviceW4 {
  DeviceBuffer qweight;  // [n][k / 8] uint32
  DeviceBuffer scales;   // [n][k / group] bf16
  DeviceBuffer zeros;    // [n][k / group] uint8
  int n = 0, k = 0, group = 0;
  bool present() const { return n > 0; }
};

// A linear layer's FP8 weights: e4m3 codes [n][k] and per-channel fp32 scales [n].
struct DeviceF8 {
  DeviceBuffer codes, scales;
  int n = 0, k = 0;
  bool present() const { return n > 0; }
};

struct DeviceLayer {
  DeviceBuffer attn_norm;   // [hidden] fp32
  DeviceBuffer w_qkv;       // [q_size + 2 * kv_size, hidden] bf16 (rows: wq, wk, wv)
  DeviceBuffer q_norm;      // [head_dim] fp32 (qk_norm models only)
  DeviceBuffer k_norm;      // [head_dim] fp32
  DeviceBuffer w_o;         // [hidden, q_size] bf16
  DeviceBuffer mlp_norm;    // [hidden] fp32
  DeviceBuffer w_gate_up;   // [2 * intermediate, hidden] bf16 (rows: gate, up)
  DeviceBuffer w_down;      // [hidden, intermediate] bf16
  // model.precision = w4a16: the same four GEMMs in int4 (the bf16 copies above are not uploaded then).
  DeviceW4 q_qkv, q_o, q_gate_up, q_down;
  // awq: 1 / the input scale of each GEMM's input (empty: none).
  DeviceBuffer inv_qkv, inv_o, inv_gate_up, inv_down;
  // model.precision = fp8: the four GEMMs in e4m3 (inputs quantized per token at run time).
  DeviceF8 f_qkv, f_o, f_gate_up, f_down;
};

struct DeviceModel {
  DeviceBuffer embed;       // [vocab, hidden] bf16
  DeviceBuffer lm_head;     // [vocab, hidden] bf16; empty when tied to embed
  DeviceBuffer final_norm;  // [hidden] fp32
  std::vector<DeviceLayer> layers;
  DeviceBuffer rope_cos, rope_sin;  // [max_positions, head_dim / 2] fp32

  const void* output_embedding() const { return lm_head.get() != nullptr ? lm_head.get() : embed.get(); }
};

DeviceModel upload_model(const ModelConfig& cfg, const LlamaWeights& w, int max_positions);

}  // namespace testbed
