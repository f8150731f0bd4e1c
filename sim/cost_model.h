// CostModel: predicts how long an engine step takes from the batch the scheduler
// formed (tokens to compute per sequence and their context). Chosen by
// cost_model.kind through one registry:
//   linear     overhead + per-token and per-sequence coefficients (calibration, tests);
//   roofline   FLOPs and bytes of each op against a hardware spec;
//   profiled   interpolation of step times measured on a real executor.
#pragma once

#include <memory>
#include <string>

#include "engine/batch.h"
#include "engine/model/model_config.h"
#include "engine/registry.h"

namespace testbed {

struct CostModelConfig {
  std::string kind = "linear";
  std::string hardware;           // roofline: hardware spec .ini
  std::string profile;            // profiled: step-time table .h5
  int tensor_parallel = 1;        // roofline: GPUs per instance
  // linear: duration = step_overhead_s + prefill_token_s * prefill tokens
  //                    + decode_seq_s * decode sequences + context_token_s * context tokens read
  double step_overhead_s = 0.002;
  double prefill_token_s = 1e-4;
  double decode_seq_s = 2e-4;
  double context_token_s = 0.0;
  void validate() const;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual double predict(const Batch& batch) const = 0;
  virtual std::string name() const = 0;
};

using CostModelRegistry = Registry<CostModel, const CostModelConfig&, const ModelConfig&>;

std::unique_ptr<CostModel> make_cost_model(const CostModelConfig& config, const ModelConfig& model);

}  // namespace testbed
