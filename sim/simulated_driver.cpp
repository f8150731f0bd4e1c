#include "sim/simulated_driver.h"

#include <chrono>

#include "engine/common/option_table.h"

namespace testbed {

void SimulatedDriverParams::bind(OptionTable& t) {
  fleet.bind(t);
  router.bind(t);
}

void SimulatedDriverParams::validate() const {
  fleet.validate();
  router.validate();
}

SimulationStats run_simulated(Engine& engine, RequestSource& source, const ProgressFn& progress) {
  Fleet fleet({&engine}, make_router(router_choice(), RouterSetup{}));
  return fleet.run(source, progress);
}

namespace {

class SimulatedDriver : public Driver {
 public:
  SimulatedDriver(const SimulatedDriverParams& p, const DriverSetup& s) : p_(p), sink_(s.sink) {}

  DriverStats run(const EngineFactory& make_engine, RequestSource& source, const ProgressFn& progress) override {
    std::vector<std::unique_ptr<Engine>> engines;
    std::vector<Engine*> raw;
    for (int i = 0; i < p_.fleet.num_instances; ++i) {
      engines.push_back(make_engine(i));
      raw.push_back(engines.back().get());
    }
    const auto wall0 = std::chrono::steady_clock::now();  // the simulation, not the engines' construction
    RouterSetup rs;
    rs.num_instances = p_.fleet.num_instances;
    rs.blocks_per_instance = raw.front()->kv_cache().num_blocks();
    Fleet fleet(raw, make_router(p_.router, rs), p_.fleet.sample_interval_s, sink_);
    const SimulationStats sim = fleet.run(source, progress);
    DriverStats stats;
    stats.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    stats.simulated_s = sim.simulated_s;
    stats.num_events = sim.num_events;
    stats.num_finished = sim.num_finished;
    stats.num_instances = p_.fleet.num_instances;
    return stats;
  }
  bool is_simulated() const override { return true; }

 private:
  SimulatedDriverParams p_;
  MetricsSink* sink_;
};

TESTBED_REGISTER(DriverRegistry, "simulated", [](const SimulatedDriverParams& p, const DriverSetup& s) {
  return std::make_unique<SimulatedDriver>(p, s);
});

}  // namespace
}  // namespace testbed
