#include "sim/simulated_driver.h"

namespace testbed {

SimulationStats run_simulated(Engine& engine, RequestSource& source, const ProgressFn& progress) {
  RouterSetup setup;
  Fleet fleet({&engine}, make_router(setup));
  return fleet.run(source, progress);
}

}  // namespace testbed
