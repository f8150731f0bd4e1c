#include "sim/cost_model.h"

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void CostModelConfig::bind(OptionTable& t) {
  kind.bind(t);
  t.add_path("cost_model.hardware", &hardware, "hardware spec .ini of one GPU (roofline; KV capacity from memory)");
  t.add("cost_model.tensor_parallel", &tensor_parallel, "GPUs per instance");
  t.add("cost_model.expert_parallel", &expert_parallel,
        "MoE models: expert groups over the instance's GPUs, each holding 1/EP of the experts (1: experts split TP ways)");
}

void CostModelConfig::validate() const {
  kind.validate();
  require(tensor_parallel >= 1, "cost_model.tensor_parallel", "must be >= 1");
  require(expert_parallel >= 1 && tensor_parallel % expert_parallel == 0, "cost_model.expert_parallel",
          "must be >= 1 and divide cost_model.tensor_parallel");
  require(expert_parallel == 1 || kind.name == "roofline", "cost_model.expert_parallel",
          "only the roofline cost model models expert parallelism");
}

std::unique_ptr<CostModel> make_cost_model(const CostModelConfig& config, const ModelConfig& model) {
  config.validate();
  CostModelSetup setup;
  setup.model = model;
  setup.hardware = config.hardware;
  setup.tensor_parallel = config.tensor_parallel;
  setup.expert_parallel = config.expert_parallel;
  return config.kind.create(setup);
}

}  // namespace testbed
