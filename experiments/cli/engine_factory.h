// Builds what a run needs from its RunConfig: the model spec, the KV capacity,
// the executor and the engine. Shared by every subcommand.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "engine/model/model_config.h"
#include "experiments/cli/run_config.h"
#include "sim/cost_model.h"

namespace testbed {

struct RunSetup {
  ModelConfig model;
  EngineConfig engine;
  WorkloadConfig workload;  // with its trace path resolved
  int num_blocks = 0;
  std::shared_ptr<const CostModel> cost_model;  // when the run needs one
};

RunSetup prepare_run(const RunConfig& config);
std::unique_ptr<Executor> make_executor(const RunConfig& config, const RunSetup& setup);

}  // namespace testbed
