// linear: a step costs a fixed overhead plus a price per prefill token, per
// decoding sequence and per context token read by attention. Fitted by hand or
// by least squares; the simplest model that still sees batch composition.
#include "sim/cost_model.h"

namespace testbed {
namespace {

class LinearCostModel : public CostModel {
 public:
  explicit LinearCostModel(const CostModelConfig& c) : c_(c) {}
  double predict(const Batch& batch) const override {
    double context = 0;
    int decode_seqs = 0;
    for (const ScheduledSeq& item : batch.items) {
      context += item.num_computed + item.num_new;
      if (item.is_decode()) ++decode_seqs;
    }
    return c_.step_overhead_s + c_.prefill_token_s * batch.num_prefill_tokens + c_.decode_seq_s * decode_seqs +
           c_.context_token_s * context;
  }
  std::string name() const override { return "linear"; }

 private:
  CostModelConfig c_;
};

TESTBED_REGISTER(CostModelRegistry, "linear", [](const CostModelConfig& c, const ModelConfig&) {
  return std::make_unique<LinearCostModel>(c);
});

}  // namespace
}  // namespace testbed
