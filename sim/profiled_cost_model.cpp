// profiled: step time interpolated from a table measured on a real executor
// (`testbed profile`), as Vidur does from its operator profiles; here the unit
// profiled is the whole engine step, so nothing is left out of the sum.
#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "sim/cost_model.h"
#include "sim/profile_table.h"

namespace testbed {
namespace {

struct ProfiledParams : ParamsOf<ProfiledParams> {
  std::string profile;  // the step-time table .h5 `testbed profile` writes
  void bind(OptionTable& t) override { t.add_path("cost_model.profile", &profile, "profiled: step-time table .h5"); }
  void validate_selected() const override {
    require(!profile.empty(), "cost_model.profile",
            "cost_model.kind = profiled needs a step-time table: make one with `testbed profile CONFIG.ini --output "
            "FILE.h5` on the executor to model, then set cost_model.profile = FILE.h5");
  }
};

class ProfiledCostModel : public CostModel {
 public:
  explicit ProfiledCostModel(ProfileTable table) : table_(std::move(table)) {}
  double predict(const StepShape& shape) const override { return shape.empty() ? 0.0 : table_.predict(shape); }
  std::string name() const override { return "profiled"; }

 private:
  ProfileTable table_;
};

TESTBED_REGISTER(CostModelRegistry, "profiled", [](const ProfiledParams& p, const CostModelSetup&) {
  return std::make_unique<ProfiledCostModel>(ProfileTable::load(p.profile));
});

}  // namespace
}  // namespace testbed
