// The simulated driver (driver.mode = simulated): a fleet of engines on
// simulated time (sim/fleet.h). Without pool sections, fleet.num_instances
// instances behind the router.type router (one instance is the single-engine
// simulation); with [pool.NAME] sections, those pools (sim/pool.h). Same
// Scheduler, same KvCacheManager as the wall-clock drivers; only the clock differs.
#pragma once

#include "engine/common/params.h"
#include "engine/driver.h"
#include "engine/engine.h"
#include "engine/request_source.h"
#include "sim/autoscaler.h"
#include "sim/faults.h"
#include "sim/fleet.h"
#include "sim/model_router.h"
#include "sim/pool.h"
#include "sim/router.h"

namespace testbed {

// The simulated driver's keys: fleet.*, router.* (every router's own keys), link.*
// and pool.NAME.* for each pool in `pools` (named before bind()). The ingress
// cache's keys are every driver's (RunConfig; DriverSetup::semantic_cache).
struct SimulatedDriverParams : ParamsOf<SimulatedDriverParams> {
  FleetConfig fleet;
  RouterChoice router = router_choice();
  KvLinkConfig link;  // link.*: what pool.NAME.link.* inherits
  FaultConfig faults;  // fault.* (sim/faults.h)
  AutoscaleConfig autoscale;  // autoscale.* of the fleet without pools (a pool's: pool.NAME.autoscale.*)
  ModelRoutingConfig model_routing;  // ingress.model_router and its keys (sim/model_router.h)
  std::vector<PoolConfig> pools;
  void bind(OptionTable& table) override;
  void validate() const override;
  // fleet.num_instances, or the pools' sizes summed.
  int num_instances() const;
};

// One engine, one instance, round-robin (that is: no) routing.
SimulationStats run_simulated(Engine& engine, RequestSource& source, const ProgressFn& progress);

}  // namespace testbed
