#include "experiments/cli/engine_factory.h"

#include "engine/common/config_error.h"
#include "sim/hardware_spec.h"
#include "sim/memory_planner.h"
#include "sim/sim_executor.h"

namespace testbed {

RunSetup prepare_run(const RunConfig& config) {
  RunSetup s;
  s.model = ModelConfig::from_json_file(require_file("model.config", config.model.config));
  s.engine = config.engine;
  s.engine.max_model_len = config.model.max_model_len > 0 ? config.model.max_model_len : s.model.max_position_embeddings;
  require(s.engine.max_model_len > 0, "model.max_model_len", "must be positive");
  const CostModelConfig& cost = config.cost_model;
  if (!cost.hardware.empty()) require_file("cost_model.hardware", cost.hardware);
  if (config.needs_cost_model()) s.cost_model = make_cost_model(cost, s.model);
  s.num_blocks = config.engine.cache.num_blocks;
  if (s.num_blocks == 0) {
    // A simulated GPU: the KV cache gets the device memory the weights leave.
    require(!cost.hardware.empty(), "cache.num_blocks",
            "must be set, or derived from memory with cost_model.hardware (a hardware spec)");
    const HardwareSpec hw = HardwareSpec::from_ini_file(cost.hardware);
    s.num_blocks = kv_blocks_from_memory(hw, s.model, s.engine.cache.block_size, s.engine.cache.gpu_memory_fraction,
                                         cost.tensor_parallel);
  }
  if (config.model.weights != "dummy") require_file("model.weights", config.model.weights);
  s.executor.model = s.model;
  s.executor.weights = config.model.weights;
  s.executor.weights_seed = config.model.seed;
  s.executor.num_blocks = s.num_blocks;
  s.executor.block_size = s.engine.cache.block_size;
  s.executor.max_model_len = s.engine.max_model_len;
  s.executor.cost_model = s.cost_model;
  return s;
}

std::unique_ptr<Executor> make_executor(const RunConfig& config, const RunSetup& s) {
  std::unique_ptr<Executor> exec = config.executor.kind.create(s.executor);
  if (config.executor.timing == "cost_model" && config.executor.kind.name != "sim")
    exec = std::make_unique<CostTimedExecutor>(std::move(exec), s.cost_model);
  return exec;
}

}  // namespace testbed
