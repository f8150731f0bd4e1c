// profiled: step time interpolated from a table measured on a real executor
// (`testbed profile`), as Vidur does from its operator profiles; here the unit
// profiled is the whole engine step, so nothing is left out of the sum.
#include "sim/cost_model.h"
#include "sim/profile_table.h"

namespace testbed {
namespace {

class ProfiledCostModel : public CostModel {
 public:
  explicit ProfiledCostModel(ProfileTable table) : table_(std::move(table)) {}
  double predict(const Batch& batch) const override { return table_.predict(shape_of(batch)); }
  std::string name() const override { return "profiled"; }

 private:
  ProfileTable table_;
};

TESTBED_REGISTER(CostModelRegistry, "profiled", [](const CostModelConfig& c, const ModelConfig&) {
  return std::make_unique<ProfiledCostModel>(ProfileTable::load(c.profile));
});

}  // namespace
}  // namespace testbed
