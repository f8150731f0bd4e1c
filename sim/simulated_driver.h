// The simulated driver (driver.mode = simulated): a fleet of engines on
// simulated time (sim/fleet.h), fleet.num_instances of them behind the
// router.type router; one instance is the single-engine simulation. Same
// Scheduler, same KvCacheManager as the wall-clock drivers; only the clock differs.
#pragma once

#include "engine/common/params.h"
#include "engine/driver.h"
#include "engine/engine.h"
#include "engine/request_source.h"
#include "sim/fleet.h"
#include "sim/router.h"

namespace testbed {

// The simulated driver's keys: fleet.* and router.* (every router's own keys).
struct SimulatedDriverParams : ParamsOf<SimulatedDriverParams> {
  FleetConfig fleet;
  RouterChoice router = router_choice();
  void bind(OptionTable& table) override;
  void validate() const override;
};

// One engine, one instance, round-robin (that is: no) routing.
SimulationStats run_simulated(Engine& engine, RequestSource& source, const ProgressFn& progress);

}  // namespace testbed
