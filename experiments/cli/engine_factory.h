// Builds what a run needs from its RunConfig: the model spec, the KV capacity,
// the cost model, the executors and the engines. Shared by every subcommand.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "engine/executor.h"
#include "engine/model/model_config.h"
#include "experiments/cli/run_config.h"

namespace testbed {

// One pool's instances (or, without pools, every instance): engine config,
// KV capacity, cost model and what its executors are built from.
struct InstanceSetup {
  EngineConfig engine;  // with max_model_len resolved (and hand_off_after_prefill for prefill pools)
  int num_blocks = 0;
  std::shared_ptr<const CostModel> cost_model;  // when the run needs one
  ExecutorSetup executor;                       // what make_executor builds from
  int tensor_parallel = 1;
  std::string hardware;  // the hardware spec .ini ("" when none)
};

struct RunSetup : InstanceSetup {
  ModelConfig model;
  std::vector<InstanceSetup> pools;     // one per [pool.NAME], in order
  std::vector<int> pool_of_instance;    // instance id -> index in pools (empty without pools)
  // The setup instance i is built from.
  const InstanceSetup& instance(int i) const { return pools.empty() ? *this : pools[pool_of_instance[i]]; }
  int num_instances() const;
};

RunSetup prepare_run(const RunConfig& config);
// Each request's per-token acceptance (request id -> A) from a real run's
// results.h5 (/requests spec_drafted, spec_accepted, spec_steps): the A whose
// stop-at-first-rejection verification gives the measured share of drafts
// accepted (spec.acceptance = trace:FILE). ConfigError naming the file or column.
std::shared_ptr<const std::unordered_map<int64_t, SpecRequestModel>> acceptance_from_run(const std::string& path);
// The configured executor (executor.kind), timed by the cost model with executor.timing = cost_model.
std::unique_ptr<Executor> make_executor(const RunConfig& config, const InstanceSetup& setup);

}  // namespace testbed
