// Quantized execution on the CPU (model.precision, model.quantization): the
// linear layers' weights are replaced by their quantize-dequantize round trip,
// so the CPU executor's fp32 arithmetic is exactly the dequantized reference
// (kernels/gemm/gemm_ref.h); embeddings, norms and the LM head stay as they are.
//
//   fp8    weights e4m3 with one scale per output channel (amax / 448); the
//          executor also rounds each linear's input to e4m3 with one scale per
//          token (dynamic W8A8, as vLLM's FP8)
//   w4a16  int4 in groups of quant_group_size along K with a 16-bit scale and a
//          4-bit zero point, 16-bit activations; quant_method:
//            rtn   round to nearest
//            gptq  error compensation over the layer's calibration inputs
//                  (kernels/gemm/quantize_ref.h; inputs from the unquantized
//                  model, all layers at once, not layer by layer)
//            awq   a per-input-channel scale searched on the calibration
//                  inputs; the executor divides that linear's input by it
//                  (exact; AWQ folds it into the previous op)
// Calibration inputs come from running the unquantized model over
// calibration_tokens(): a fixed, seeded, Zipf-distributed token sequence.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"

namespace testbed {

// The seven linears of a layer, in LayerWeights::input_scale's order.
enum LinearIndex { kLinQ = 0, kLinK, kLinV, kLinO, kLinGate, kLinUp, kLinDown, kNumLinears };

// (layer, linear) -> that linear's inputs, rows of its K values.
using CalibrationInputs = std::map<std::pair<int, int>, std::vector<float>>;

// Round-trips every linear weight of `w` at cfg.precision / quant_method;
// gptq and awq need `calib`. Throws ConfigError (model.precision,
// model.quantization) for what it cannot do.
void quantize_linear_weights(const ModelConfig& cfg, LlamaWeights& w, const CalibrationInputs* calib);

// `n` tokens drawn from a Zipf(1) law over the vocabulary (rank r with
// probability ~ 1/r, ranks mapped to ids by one fixed permutation, the draws
// by `seed`): text-like token frequencies without a tokenizer or a corpus,
// the same frequent tokens in every sequence.
std::vector<int32_t> calibration_tokens(int vocab_size, int n, uint64_t seed);

// The e4m3 round trip of each row of x [rows][cols] with one scale per row, in place.
void round_rows_to_fp8(float* x, int rows, int cols);

}  // namespace testbed
