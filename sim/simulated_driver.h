// The simulated driver: one Engine on simulated time, as a fleet of one
// instance (sim/fleet.h). Arrivals and step completions are events; a step that
// starts at t ends at t + the executor's duration, when the scheduler's
// postprocess runs. Same Scheduler, same KvCacheManager as the wall-clock
// drivers; only the clock differs.
#pragma once

#include "engine/driver.h"
#include "engine/engine.h"
#include "engine/request_source.h"
#include "sim/fleet.h"

namespace testbed {

SimulationStats run_simulated(Engine& engine, RequestSource& source, const ProgressFn& progress);

}  // namespace testbed
