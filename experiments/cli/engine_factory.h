// Builds what a run needs from its RunConfig: the model spec, the KV capacity,
// the cost model, the executors and the engines. Shared by every subcommand.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "engine/executor.h"
#include "engine/model/model_config.h"
#include "experiments/cli/run_config.h"

namespace testbed {

struct RunSetup {
  ModelConfig model;
  EngineConfig engine;  // with max_model_len resolved
  int num_blocks = 0;
  std::shared_ptr<const CostModel> cost_model;  // when the run needs one
  ExecutorSetup executor;                       // what make_executor builds from
};

RunSetup prepare_run(const RunConfig& config);
// The configured executor (executor.kind), timed by the cost model with executor.timing = cost_model.
std::unique_ptr<Executor> make_executor(const RunConfig& config, const RunSetup& setup);

}  // namespace testbed
