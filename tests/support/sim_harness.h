// Helpers for the simulator's tests: the linear cost model most fleet tests price steps with.
#pragma once

#include <iomanip>
#include <memory>
#include <sstream>
#include <string>

#include "engine/common/option_table.h"
#include "engine/model/model_config.h"
#include "sim/cost_model.h"

namespace testbed::test {

// A step costs overhead_s + prefill_token_s per prompt token + decode_seq_s per decoding sequence
// (overhead 2 ms: the linear model's default).
inline std::shared_ptr<const CostModel> linear_cost(const ModelConfig& model, double prefill_token_s = 2e-4,
                                                    double decode_seq_s = 1e-4, double overhead_s = 2e-3) {
  const auto text = [](double v) {
    std::ostringstream s;
    s << std::setprecision(17) << v;
    return s.str();
  };
  CostModelConfig cm;
  set_options(cm, {{"cost_model.prefill_token_s", text(prefill_token_s)},
                   {"cost_model.decode_seq_s", text(decode_seq_s)},
                   {"cost_model.step_overhead_s", text(overhead_s)}});
  return make_cost_model(cm, model);
}

}  // namespace testbed::test
