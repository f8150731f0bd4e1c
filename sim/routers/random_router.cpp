// random: a uniformly random instance (seeded by router.seed).
#include "engine/rng.h"
#include "sim/router.h"

namespace testbed {
namespace {

class RandomRouter : public Router {
 public:
  RandomRouter(int n, uint64_t seed) : n_(n), rng_(seed) {}
  int route(const RoutingContext&) override { return static_cast<int>(rng_.below(n_)); }

 private:
  int n_;
  Rng rng_;
};

TESTBED_REGISTER(RouterRegistry, "random", [](const RouterSetup& s) {
  return std::make_unique<RandomRouter>(s.num_instances, s.config.seed);
});

}  // namespace
}  // namespace testbed
