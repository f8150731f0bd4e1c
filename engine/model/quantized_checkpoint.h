// Quantized checkpoints in safetensors, read into the dequantized float
// weights the CPU executor multiplies (engine/model/quantize_weights.h has the
// arithmetic). Each linear layer PREFIX (model.layers.L.self_attn.q_proj, ...)
// may be stored as
//   GPTQ (AutoGPTQ)  PREFIX.qweight I32 [K/8, N]: eight 4-bit codes per word along K;
//                    PREFIX.qzeros I32 [K/g, N/8]: along N, each stored minus 1 (the
//                    format's v1 offset); PREFIX.scales F16/BF16 [K/g, N];
//                    PREFIX.g_idx I32 [K] (optional): the group of each input channel
//   AWQ (AutoAWQ)    PREFIX.qweight I32 [K, N/8] and PREFIX.qzeros I32 [K/g, N/8],
//                    packed along N in the order 0 2 4 6 1 3 5 7; PREFIX.scales [K/g, N]
//   FP8              PREFIX.weight F8_E4M3 [N, K] with PREFIX.weight_scale F32, one
//                    value ([] or [1]) or one per output channel ([N] or [N, 1])
//   plain            PREFIX.weight F32/F16/BF16 [N, K]
// The group size g comes from the scales' shape. Embeddings, norms and the LM
// head are plain. Errors name the file and the tensor.
#pragma once

#include <string>

#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"

namespace testbed {

// The weights of `path`; *format gets "" (no quantized linear), "gptq", "awq" or "fp8".
LlamaWeights load_checkpoint(const ModelConfig& cfg, const std::string& path, std::string* format);

}  // namespace testbed
