// Cost models (the CostModel interface is engine/cost_model.h): chosen by
// cost_model.kind through one registry, each with its own keys:
//   linear     overhead + per-token and per-sequence coefficients (calibration, tests);
//   roofline   FLOPs and bytes of each op against a hardware spec;
//   profiled   interpolation of step times measured on a real executor.
// cost_model.hardware and cost_model.tensor_parallel describe the instance
// (the KV capacity is planned from them too), so every model is given them.
#pragma once

#include <memory>
#include <string>

#include "engine/common/choice.h"
#include "engine/common/registry.h"
#include "engine/cost_model.h"
#include "engine/model/model_config.h"

namespace testbed {

class OptionTable;

// What every cost model is built from.
struct CostModelSetup {
  ModelConfig model;
  std::string hardware;     // hardware spec .ini ("" when none is configured)
  int tensor_parallel = 1;  // GPUs per instance
  int expert_parallel = 1;  // expert groups over those GPUs (MoE, roofline)
};

using CostModelRegistry = Registry<CostModel, const CostModelSetup&>;

struct CostModelConfig {
  Choice<CostModelRegistry> kind{"cost_model.kind", "linear", "how step durations are predicted"};
  std::string hardware;     // cost_model.hardware: hardware spec .ini
  int tensor_parallel = 1;  // cost_model.tensor_parallel: GPUs per instance
  int expert_parallel = 1;  // cost_model.expert_parallel: expert groups over them (MoE; divides tensor_parallel)
  void bind(OptionTable& table);
  void validate() const;
};

std::unique_ptr<CostModel> make_cost_model(const CostModelConfig& config, const ModelConfig& model);

}  // namespace testbed
