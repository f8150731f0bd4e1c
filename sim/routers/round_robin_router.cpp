// round_robin: instances in turn, blind to load and cache (a Kubernetes Service).
#include "sim/router.h"

namespace testbed {
namespace {

class RoundRobinRouter : public Router {
 public:
  explicit RoundRobinRouter(int n) : n_(n) {}
  int route(const RoutingContext&) override { return next_++ % n_; }

 private:
  int n_;
  uint64_t next_ = 0;
};

TESTBED_REGISTER(RouterRegistry, "round_robin",
                 [](const RouterSetup& s) { return std::make_unique<RoundRobinRouter>(s.num_instances); });

}  // namespace
}  // namespace testbed
