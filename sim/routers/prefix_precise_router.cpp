// prefix_precise: the instance holding the longest cached prefix of the
// request, known exactly from the instances' KvEvents (stores and evictions),
// as llm-d's precise prefix-cache scorer learns it from vLLM's event stream.
// Ties (including "nobody has it") go to the least loaded instance.
#include "sim/routers/kv_index_router.h"

namespace testbed {
namespace {

class PrefixPreciseRouter : public KvIndexRouter {
 public:
  PrefixPreciseRouter(int n, int blocks_per_instance) : KvIndexRouter(n, blocks_per_instance), n_(n) {}
  int route(const RoutingContext& ctx) override {
    return longest_match_least_loaded(ctx.loads, match(ctx), static_cast<int>(next_++ % static_cast<uint64_t>(n_)));
  }

 private:
  int n_;
  uint64_t next_ = 0;
};

TESTBED_REGISTER(RouterRegistry, "prefix_precise",
                 [](const RouterSetup& s) {
  return std::make_unique<PrefixPreciseRouter>(s.num_instances, s.blocks_per_instance);
});

}  // namespace
}  // namespace testbed
