#include "experiments/cli/engine_factory.h"

#include "engine/common/config_error.h"
#include "sim/hardware_spec.h"
#include "sim/memory_planner.h"
#include "sim/pool.h"
#include "sim/sim_executor.h"

namespace testbed {
namespace {

// Engine config, capacity and cost model from one set of scheduler/cache/cost_model keys.
InstanceSetup prepare_instances(const RunConfig& config, const ModelConfig& model, const EngineConfig& engine,
                                const CostModelConfig& cost) {
  InstanceSetup s;
  s.engine = engine;
  s.engine.max_model_len = config.model.max_model_len > 0 ? config.model.max_model_len : model.max_position_embeddings;
  require(s.engine.max_model_len > 0, "model.max_model_len", "must be positive");
  if (!cost.hardware.empty()) require_file("cost_model.hardware", cost.hardware);
  if (config.needs_cost_model()) s.cost_model = make_cost_model(cost, model);
  s.num_blocks = engine.cache.num_blocks;
  if (s.num_blocks == 0) {
    // A simulated GPU: the KV cache gets the device memory the weights leave.
    require(!cost.hardware.empty(), "cache.num_blocks",
            "must be set, or derived from memory with cost_model.hardware (a hardware spec)");
    const HardwareSpec hw = HardwareSpec::from_ini_file(cost.hardware);
    s.num_blocks = kv_blocks_from_memory(hw, model, s.engine.cache.block_size, s.engine.cache.gpu_memory_fraction,
                                         cost.tensor_parallel);
  }
  s.tensor_parallel = cost.tensor_parallel;
  s.hardware = cost.hardware;
  s.executor.model = model;
  s.executor.weights = config.model.weights;
  s.executor.weights_seed = config.model.seed;
  s.executor.num_blocks = s.num_blocks;
  s.executor.block_size = s.engine.cache.block_size;
  s.executor.max_model_len = s.engine.max_model_len;
  s.executor.cost_model = s.cost_model;
  if (config.spec.enabled() && config.executor.kind.name == "sim") {  // the simulated executor drafts itself
    s.executor.spec_num_tokens = config.spec.num_tokens;
    s.executor.spec_max_batch_size = config.spec.max_batch_size;
    s.executor.spec_acceptance = config.spec.fixed_acceptance();
    s.executor.spec_seed = config.sampling.seed;
  }
  return s;
}

}  // namespace

int RunSetup::num_instances() const {
  return pools.empty() ? 1 : static_cast<int>(pool_of_instance.size());
}

RunSetup prepare_run(const RunConfig& config) {
  RunSetup s;
  s.model = ModelConfig::from_json_file(require_file("model.config", config.model.config));
  static_cast<InstanceSetup&>(s) = prepare_instances(config, s.model, config.engine, config.cost_model);
  for (const PoolConfig& p : config.pools()) {
    with_key_prefix(p.prefix(), [&] { s.pools.push_back(prepare_instances(config, s.model, p.engine, p.cost_model)); });
    s.pools.back().engine.hand_off_after_prefill = p.hands_off_after_prefill();
    s.pools.back().engine.key_prefix = p.prefix();
    for (int k = 0; k < p.size; ++k) s.pool_of_instance.push_back(static_cast<int>(s.pools.size()) - 1);
  }
  if (config.model.weights != "dummy") require_file("model.weights", config.model.weights);
  return s;
}

std::unique_ptr<Executor> make_executor(const RunConfig& config, const InstanceSetup& s) {
  std::unique_ptr<Executor> exec = config.executor.kind.create(s.executor);
  if (config.executor.kind.name != "sim") exec = with_proposer(std::move(exec), config.spec, s.executor.model.vocab_size);
  if (config.executor.timing == "cost_model" && config.executor.kind.name != "sim")
    exec = std::make_unique<CostTimedExecutor>(std::move(exec), s.cost_model);
  return exec;
}

}  // namespace testbed
