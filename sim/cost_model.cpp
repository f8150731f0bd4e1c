#include "sim/cost_model.h"

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void CostModelConfig::bind(OptionTable& t) {
  kind.bind(t);
  t.add_path("cost_model.hardware", &hardware, "hardware spec .ini of one GPU (roofline; KV capacity from memory)");
  t.add("cost_model.tensor_parallel", &tensor_parallel, "GPUs per instance");
}

void CostModelConfig::validate() const {
  kind.validate();
  require(tensor_parallel >= 1, "cost_model.tensor_parallel", "must be >= 1");
}

std::unique_ptr<CostModel> make_cost_model(const CostModelConfig& config, const ModelConfig& model) {
  config.validate();
  CostModelSetup setup;
  setup.model = model;
  setup.hardware = config.hardware;
  setup.tensor_parallel = config.tensor_parallel;
  return config.kind.create(setup);
}

}  // namespace testbed
