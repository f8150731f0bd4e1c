#include "sim/router.h"

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

}  // namespace testbed
