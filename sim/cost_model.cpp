#include "sim/cost_model.h"

#include "engine/config_error.h"

namespace testbed {

void CostModelConfig::validate() const {
  require(CostModelRegistry::instance().contains(kind), "cost_model.kind",
          "unknown cost model '" + kind + "' (known: " + CostModelRegistry::instance().names_joined() + ")");
  require(tensor_parallel >= 1, "cost_model.tensor_parallel", "must be >= 1");
  require(step_overhead_s >= 0, "cost_model.step_overhead_s", "must be >= 0");
  require(prefill_token_s >= 0, "cost_model.prefill_token_s", "must be >= 0");
  require(decode_seq_s >= 0, "cost_model.decode_seq_s", "must be >= 0");
  require(context_token_s >= 0, "cost_model.context_token_s", "must be >= 0");
}

std::unique_ptr<CostModel> make_cost_model(const CostModelConfig& config, const ModelConfig& model) {
  config.validate();
  return CostModelRegistry::instance().create("cost_model.kind", config.kind, config, model);
}

}  // namespace testbed
