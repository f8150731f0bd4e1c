// least_loaded: the instance with the fewest requests (queued + running), then
// the lowest KV usage; ties rotate so equal instances share the work.
#include "sim/router.h"

namespace testbed {
namespace {

class LeastLoadedRouter : public Router {
 public:
  explicit LeastLoadedRouter(int n) : n_(n) {}
  int route(const RoutingContext& ctx) override { return least_loaded_instance(ctx.loads, next_++ % n_); }

 private:
  int n_;
  uint64_t next_ = 0;
};

TESTBED_REGISTER(RouterRegistry, "least_loaded",
                 [](const RouterSetup& s) { return std::make_unique<LeastLoadedRouter>(s.num_instances); });

}  // namespace
}  // namespace testbed
