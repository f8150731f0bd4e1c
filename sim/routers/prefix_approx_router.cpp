// prefix_approx: the instance it sent the longest matching prefix to, from a
// router-side index of what it routed (LRU-bounded per instance), hearing no
// events: the Gateway API Inference Extension's approximate prefix scorer. It
// keeps believing in prefixes the instance has already evicted.
#include "engine/common/option_table.h"
#include "sim/prefix_index.h"
#include "sim/router.h"

namespace testbed {
namespace {

struct PrefixApproxParams : ParamsOf<PrefixApproxParams> {
  int64_t approx_capacity_blocks = 0;  // blocks remembered per instance (0: the instance's KV blocks)
  void bind(OptionTable& t) override {
    t.add("router.approx_capacity_blocks", &approx_capacity_blocks,
          "prefix_approx, cache_aware: blocks remembered per instance (0: its KV blocks)");
  }
  void validate() const override {
    require(approx_capacity_blocks >= 0, "router.approx_capacity_blocks", "must be >= 0");
  }
};

class PrefixApproxRouter : public Router {
 public:
  PrefixApproxRouter(int n, int64_t capacity) : n_(n), routed_(n, capacity) {}

  bool needs_block_hashes() const override { return true; }
  int route(const RoutingContext& ctx) override {
    routed_.index().match(ctx.block_hashes, matched_);
    const int chosen = longest_match_least_loaded(ctx.loads, matched_, static_cast<int>(next_++ % static_cast<uint64_t>(n_)));
    routed_.record(chosen, ctx.block_hashes);
    return chosen;
  }

 private:
  int n_;
  RoutedBlocksLru routed_;
  std::vector<int> matched_;
  uint64_t next_ = 0;
};

TESTBED_REGISTER(RouterRegistry, "prefix_approx", [](const PrefixApproxParams& p, const RouterSetup& s) {
  const int64_t cap = p.approx_capacity_blocks > 0 ? p.approx_capacity_blocks : s.blocks_per_instance;
  return std::make_unique<PrefixApproxRouter>(s.num_instances, cap);
});

}  // namespace
}  // namespace testbed
