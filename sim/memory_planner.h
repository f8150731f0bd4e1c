// Memory planning of one instance: the bytes of weights and of KV per token
// each GPU of a tensor-parallel group holds, and so how many KV blocks fit
// beside the weights (cache.num_blocks = 0 derives the cache from this).
#pragma once

#include "engine/model/model_config.h"
#include "sim/hardware_spec.h"

namespace testbed {

// Per-GPU dimensions under Megatron-style tensor parallelism: heads and the MLP
// width split TP ways; K/V heads split too, or are replicated (one per GPU) when
// TP exceeds them, as vLLM does for GQA models.
struct TpSplit {
  double layers, hidden, q_heads, kv_heads, head_dim, inter, vocab;
};
// Throws ConfigError naming cost_model.tensor_parallel when the model does not split `tp` ways.
void check_tp_split(const ModelConfig& model, int tp);
TpSplit tp_split(const ModelConfig& model, int tp);

// Bytes of weights one GPU holds under tensor parallelism (Megatron-style
// column/row splits, vocab-parallel embedding and LM head; K/V heads replicated
// when tensor_parallel exceeds their number, as vLLM does). tensor_parallel = 1
// gives num_params() * dtype_bytes().
double weight_bytes_per_gpu(const ModelConfig& model, int tensor_parallel);
// Bytes of K and V per token one GPU stores (activation dtype, replicated heads included).
double kv_bytes_per_token_per_gpu(const ModelConfig& model, int tensor_parallel);
// Bytes per element of activations and the KV cache: the checkpoint dtype, but
// 16-bit for 8-bit checkpoints (vLLM's kv_cache_dtype = auto).
int activation_bytes(const ModelConfig& model);

// KV blocks that fit beside the weights: per GPU,
//   floor((capacity * fraction - weights / TP - reserve) / (block_size * KV bytes per token / TP)).
// Throws ConfigError naming cache.gpu_memory_fraction when nothing is left for KV
// (and cache.block_size / cost_model.tensor_parallel for bad arguments).
int kv_blocks_from_memory(const HardwareSpec& hardware, const ModelConfig& model, int block_size,
                          double gpu_memory_fraction, int tensor_parallel, const ModelConfig* draft = nullptr);
// (With `draft`, a speculative draft model shares the GPUs: its weights come off
// the budget too, and each block holds the draft's K/V beside the target's,
// the draft getting as many blocks as the target, as vLLM gives it.)

}  // namespace testbed
