#include "experiments/cli/engine_factory.h"

#include <algorithm>

#include "engine/config_error.h"
#include "engine/cpu_executor.h"
#include "engine/model/llama_weights.h"
#include "sim/hardware_spec.h"
#include "sim/roofline_cost_model.h"
#include "sim/sim_executor.h"
#if defined(TESTBED_HAVE_CUDA) && __has_include("engine/cuda/cuda_executor.h")
#include "engine/cuda/cuda_executor.h"
#define TESTBED_CUDA_EXECUTOR 1
#endif

namespace testbed {

RunSetup prepare_run(const RunConfig& config) {
  RunSetup s;
  s.model = ModelConfig::from_json_file(config.resolve_path("model.config", config.model.config));
  s.engine = config.engine;
  s.engine.max_model_len = config.model.max_model_len > 0 ? config.model.max_model_len : s.model.max_position_embeddings;
  require(s.engine.max_model_len > 0, "model.max_model_len", "must be positive");
  // Files named by the cost model resolve like every other path of the config.
  CostModelConfig cost = config.cost_model;
  if (!cost.hardware.empty()) cost.hardware = config.resolve_path("cost_model.hardware", cost.hardware);
  if (!cost.profile.empty() && cost.kind == "profiled") cost.profile = config.resolve_path("cost_model.profile", cost.profile);
  if (config.executor.kind == "sim" || config.executor.timing == "cost_model") s.cost_model = make_cost_model(cost, s.model);
  s.num_blocks = config.engine.cache.num_blocks;
  if (s.num_blocks == 0) {
    // A simulated GPU: the KV cache gets the device memory the weights leave.
    require(!cost.hardware.empty(), "cache.num_blocks",
            "must be set, or derived from memory with cost_model.hardware (a hardware spec)");
    const HardwareSpec hw = HardwareSpec::from_ini_file(cost.hardware);
    s.num_blocks = kv_blocks_from_memory(hw, s.model, s.engine.cache.block_size, s.engine.cache.gpu_memory_fraction,
                                         cost.tensor_parallel);
  }
  if (config.model.weights != "dummy") config.resolve_path("model.weights", config.model.weights);
  s.workload = config.workload;
  if (s.workload.kind == "trace") s.workload.trace.path = config.resolve_path("trace.path", s.workload.trace.path);
  return s;
}

std::unique_ptr<Executor> make_executor(const RunConfig& config, const RunSetup& s) {
  std::unique_ptr<Executor> exec;
  if (config.executor.kind == "sim") return std::make_unique<SimExecutor>(s.cost_model, s.model.vocab_size);
  if (config.executor.kind == "cpu") {
    LlamaWeights weights = config.model.weights == "dummy"
                               ? make_dummy_weights(s.model, config.model.seed)
                               : load_safetensors_weights(s.model, config.resolve_path("model.weights", config.model.weights));
    exec = std::make_unique<CpuExecutor>(s.model, std::move(weights), s.num_blocks, s.engine.cache.block_size,
                                         s.engine.max_model_len);
  } else {
#ifdef TESTBED_CUDA_EXECUTOR
    require(cuda_device_available(), "executor.kind", "cuda: no CUDA device is visible on this machine");
    const LlamaWeights weights = config.model.weights == "dummy"
                                     ? make_dummy_weights(s.model, config.model.seed)
                                     : load_safetensors_weights(s.model, config.resolve_path("model.weights", config.model.weights));
    exec = make_cuda_executor(s.model, weights, s.num_blocks, s.engine.cache.block_size, s.engine.max_model_len);
#else
    throw ConfigError("executor.kind: 'cuda' needs a build with CUDA (nvcc was not found at build time)");
#endif
  }
  if (config.executor.timing == "cost_model") exec = std::make_unique<CostTimedExecutor>(std::move(exec), s.cost_model);
  return exec;
}

}  // namespace testbed
