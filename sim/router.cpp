#include "sim/router.h"

#include <algorithm>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

RouterChoice router_choice(const std::string& type, const std::vector<std::pair<std::string, std::string>>& keys) {
  RouterChoice c("router.type", type, "how each arrival picks an instance");
  set_options(c, keys);
  return c;
}

std::unique_ptr<Router> make_router(const RouterChoice& choice, const RouterSetup& setup) {
  return choice.create(setup);
}

int least_loaded_instance(const std::vector<InstanceLoad>& loads, int start) {
  const int n = static_cast<int>(loads.size());
  int best = -1;
  for (int k = 0; k < n; ++k) {
    const int i = (start + k) % n;
    if (!loads[i].available) continue;
    if (best < 0 || loads[i].load() < loads[best].load() ||
        (loads[i].load() == loads[best].load() && loads[i].kv_usage < loads[best].kv_usage))
      best = i;
  }
  return best;
}

int longest_match_least_loaded(const std::vector<InstanceLoad>& loads, const std::vector<int>& matched, int start) {
  const int n = static_cast<int>(loads.size());
  int best_match = 0;
  for (int m : matched) best_match = std::max(best_match, m);
  // One pass, as least_loaded_instance over the loads with 2^30 requests
  // waiting wherever less than the best match is held: no copy of the fleet's
  // loads per decision.
  int best = -1, best_load = 0;
  double best_kv = 0.0;
  for (int k = 0, i = start; k < n; ++k, i = i + 1 == n ? 0 : i + 1) {
    const InstanceLoad& l = loads[i];
    if (!l.available) continue;
    const int load = (matched[i] == best_match ? l.num_waiting : 1 << 30) + l.num_running;
    if (best < 0 || load < best_load || (load == best_load && l.kv_usage < best_kv)) {
      best = i;
      best_load = load;
      best_kv = l.kv_usage;
    }
  }
  return best;
}

}  // namespace testbed
