// The CUDA executor's entry points, as a plain C++ header (no CUDA headers), so
// the CLI and the engine can include it in any build that has TESTBED_HAVE_CUDA.
#pragma once

#include <memory>

#include "engine/executor.h"
#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"

namespace testbed {

// True when the CUDA runtime reports at least one device (kernels/common/device_probe.h
// says why not, and tells a GPU the runtime cannot use from no GPU).
bool cuda_device_available();

// The Llama-family forward pass on the GPU over a paged bf16 KV cache laid out
// as engine/kv_layout.h says (num_blocks blocks of block_size tokens per layer).
// Weights are converted to bf16 on upload. Throws std::invalid_argument for a
// model the kernels do not support (head_dim other than 64 or 128, a GQA group
// above 16) and std::runtime_error for CUDA failures.
std::unique_ptr<Executor> make_cuda_executor(const ModelConfig& cfg, const LlamaWeights& weights, int num_blocks,
                                             int block_size, int max_model_len);

// executor.kind = cuda from an ExecutorSetup (weights loaded and quantized as
// configured). Throws ConfigError naming executor.kind when the CUDA runtime
// has no usable device. The engine reaches it through engine/cuda_module.h.
std::unique_ptr<Executor> make_cuda_executor(const ExecutorSetup& setup);

}  // namespace testbed
