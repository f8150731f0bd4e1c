// cache_aware: SGLang's router rule. If the load (requests in an instance) is
// imbalanced by both an absolute and a relative threshold
//   max - min > balance_abs_threshold  and  max > min * balance_rel_threshold,
// the shortest queue wins. Otherwise the instance whose routed-prefix tree
// matches the largest share of the prompt wins if that share exceeds
// cache_threshold; else the instance with the smallest tree (the most room).
// SGLang's tree is a radix tree of routed text; ours is the same idea at block
// granularity (RoutedBlocksLru), and like SGLang's it hears no evictions.
#include <algorithm>

#include "engine/common/option_table.h"
#include "sim/prefix_index.h"
#include "sim/router.h"

namespace testbed {
namespace {

struct CacheAwareParams : ParamsOf<CacheAwareParams> {
  int64_t approx_capacity_blocks = 0;  // blocks remembered per instance (0: the instance's KV blocks)
  // SGLang's router defaults
  double cache_threshold = 0.5;
  int balance_abs_threshold = 32;
  double balance_rel_threshold = 1.0001;
  void bind(OptionTable& t) override {
    t.add("router.approx_capacity_blocks", &approx_capacity_blocks,
          "prefix_approx, cache_aware: blocks remembered per instance (0: its KV blocks)");
    t.add("router.cache_threshold", &cache_threshold, "cache_aware: prefix match ratio that wins");
    t.add("router.balance_abs_threshold", &balance_abs_threshold, "cache_aware: load gap (requests) that is imbalance");
    t.add("router.balance_rel_threshold", &balance_rel_threshold, "cache_aware: load ratio that is imbalance");
  }
  void validate() const override {
    require(approx_capacity_blocks >= 0, "router.approx_capacity_blocks", "must be >= 0");
    require(cache_threshold >= 0 && cache_threshold <= 1, "router.cache_threshold", "must be in [0, 1]");
    require(balance_abs_threshold >= 0, "router.balance_abs_threshold", "must be >= 0");
    require(balance_rel_threshold >= 1, "router.balance_rel_threshold", "must be >= 1");
  }
};

class CacheAwareRouter : public Router {
 public:
  CacheAwareRouter(int n, const CacheAwareParams& c, int64_t capacity) : n_(n), c_(c), routed_(n, capacity) {}

  bool needs_block_hashes() const override { return true; }
  int route(const RoutingContext& ctx) override {
    int lo = 1 << 30, hi = 0;
    for (const InstanceLoad& l : ctx.loads) {
      lo = std::min(lo, l.load());
      hi = std::max(hi, l.load());
    }
    int chosen;
    if (hi - lo > c_.balance_abs_threshold && hi > lo * c_.balance_rel_threshold) {
      chosen = least_loaded_instance(ctx.loads, next_++ % n_);
    } else {
      routed_.index().match(ctx.block_hashes, matched_);
      int best = 0;
      for (int i = 1; i < n_; ++i)
        if (matched_[i] > matched_[best]) best = i;
      const double ratio = ctx.block_hashes.empty() ? 0.0 : static_cast<double>(matched_[best]) / ctx.block_hashes.size();
      if (ratio > c_.cache_threshold) {
        chosen = best;
      } else {
        chosen = 0;
        for (int i = 1; i < n_; ++i)
          if (routed_.size(i) < routed_.size(chosen)) chosen = i;
      }
    }
    routed_.record(chosen, ctx.block_hashes);
    return chosen;
  }

 private:
  int n_;
  CacheAwareParams c_;
  RoutedBlocksLru routed_;
  std::vector<int> matched_;
  uint64_t next_ = 0;
};

TESTBED_REGISTER(RouterRegistry, "cache_aware", [](const CacheAwareParams& p, const RouterSetup& s) {
  const int64_t cap = p.approx_capacity_blocks > 0 ? p.approx_capacity_blocks : s.blocks_per_instance;
  return std::make_unique<CacheAwareRouter>(s.num_instances, p, cap);
});

}  // namespace
}  // namespace testbed
