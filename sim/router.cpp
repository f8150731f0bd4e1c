#include "sim/router.h"

#include "engine/config_error.h"
#include "experiments/cli/option_table.h"

namespace testbed {

void RouterConfig::bind(OptionTable& t) {
  t.add("router.type", &type, "round_robin | random | least_loaded | prefix_precise | prefix_approx | weighted | cache_aware");
  t.add("router.seed", &seed, "seed of random choices");
  t.add("router.weight_prefix", &weight_prefix, "weighted: prefix-match scorer weight");
  t.add("router.weight_queue", &weight_queue, "weighted: queue-depth scorer weight");
  t.add("router.weight_kv", &weight_kv, "weighted: KV-usage scorer weight");
  t.add("router.approx_capacity_blocks", &approx_capacity_blocks,
        "prefix_approx, cache_aware: blocks remembered per instance (0: its KV blocks)");
  t.add("router.cache_threshold", &cache_threshold, "cache_aware: prefix match ratio that wins");
  t.add("router.balance_abs_threshold", &balance_abs_threshold, "cache_aware: load gap (requests) that is imbalance");
  t.add("router.balance_rel_threshold", &balance_rel_threshold, "cache_aware: load ratio that is imbalance");
}

void RouterConfig::validate() const {
  require(RouterRegistry::instance().contains(type), "router.type",
          "unknown router '" + type + "' (known: " + RouterRegistry::instance().names_joined() + ")");
  require(weight_prefix >= 0 && weight_queue >= 0 && weight_kv >= 0, "router.weight_prefix",
          "weights must be >= 0");
  require(approx_capacity_blocks >= 0, "router.approx_capacity_blocks", "must be >= 0");
  require(cache_threshold >= 0 && cache_threshold <= 1, "router.cache_threshold", "must be in [0, 1]");
  require(balance_abs_threshold >= 0, "router.balance_abs_threshold", "must be >= 0");
  require(balance_rel_threshold >= 1, "router.balance_rel_threshold", "must be >= 1");
}

std::unique_ptr<Router> make_router(const RouterSetup& setup) {
  setup.config.validate();
  return RouterRegistry::instance().create("router.type", setup.config.type, setup);
}

int least_loaded_instance(const std::vector<InstanceLoad>& loads, int start) {
  const int n = static_cast<int>(loads.size());
  int best = -1;
  for (int k = 0; k < n; ++k) {
    const int i = (start + k) % n;
    if (best < 0 || loads[i].load() < loads[best].load() ||
        (loads[i].load() == loads[best].load() && loads[i].kv_usage < loads[best].kv_usage))
      best = i;
  }
  return best;
}

}  // namespace testbed
