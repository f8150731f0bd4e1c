// random: a uniformly random instance (seeded by router.seed).
#include "engine/common/option_table.h"
#include "engine/common/rng.h"
#include "sim/router.h"

namespace testbed {
namespace {

struct RandomParams : ParamsOf<RandomParams> {
  uint64_t seed = 1;
  void bind(OptionTable& t) override { t.add("router.seed", &seed, "random: seed of its choices"); }
};

class RandomRouter : public Router {
 public:
  RandomRouter(int n, uint64_t seed) : n_(n), rng_(seed) {}
  int route(const RoutingContext&) override { return static_cast<int>(rng_.below(n_)); }

 private:
  int n_;
  Rng rng_;
};

TESTBED_REGISTER(RouterRegistry, "random", [](const RandomParams& p, const RouterSetup& s) {
  return std::make_unique<RandomRouter>(s.num_instances, p.seed);
});

}  // namespace
}  // namespace testbed
