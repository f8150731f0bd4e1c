// linear: a step costs a fixed overhead plus a price per prefill token, per
// decoding sequence and per context token read by attention. Fitted by hand or
// by least squares; the simplest model that still sees batch composition.
#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "sim/cost_model.h"

namespace testbed {
namespace {

struct LinearParams : ParamsOf<LinearParams> {
  // duration = step_overhead_s + prefill_token_s * prefill tokens
  //            + decode_seq_s * decode sequences + context_token_s * context tokens read
  double step_overhead_s = 0.002;
  double prefill_token_s = 1e-4;
  double decode_seq_s = 2e-4;
  double context_token_s = 0.0;
  void bind(OptionTable& t) override {
    t.add("cost_model.step_overhead_s", &step_overhead_s, "linear: fixed cost per step");
    t.add("cost_model.prefill_token_s", &prefill_token_s, "linear: cost per prefill token");
    t.add("cost_model.decode_seq_s", &decode_seq_s, "linear: cost per decoding sequence");
    t.add("cost_model.context_token_s", &context_token_s, "linear: cost per context token attended");
  }
  void validate() const override {
    require(step_overhead_s >= 0, "cost_model.step_overhead_s", "must be >= 0");
    require(prefill_token_s >= 0, "cost_model.prefill_token_s", "must be >= 0");
    require(decode_seq_s >= 0, "cost_model.decode_seq_s", "must be >= 0");
    require(context_token_s >= 0, "cost_model.context_token_s", "must be >= 0");
  }
};

class LinearCostModel : public CostModel {
 public:
  explicit LinearCostModel(const LinearParams& p) : p_(p) {}
  double predict(const StepShape& shape) const override {
    if (shape.empty()) return 0.0;
    double context = 0, prefill = 0;
    int decode_seqs = 0;
    for (const SeqShape& s : shape) {
      context += s.num_computed + s.num_new;
      if (s.is_decode)
        ++decode_seqs;
      else
        prefill += s.num_new;
    }
    return p_.step_overhead_s + p_.prefill_token_s * prefill + p_.decode_seq_s * decode_seqs +
           p_.context_token_s * context;
  }
  std::string name() const override { return "linear"; }

 private:
  LinearParams p_;
};

TESTBED_REGISTER(CostModelRegistry, "linear", [](const LinearParams& p, const CostModelSetup&) {
  return std::make_unique<LinearCostModel>(p);
});

}  // namespace
}  // namespace testbed
