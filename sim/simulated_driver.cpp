#include "sim/simulated_driver.h"

#include <chrono>

#include "engine/common/option_table.h"
#include "sim/memory_planner.h"
#include "engine/common/config_error.h"

namespace testbed {

void SimulatedDriverParams::bind(OptionTable& t) {
  fleet.bind(t);
  router.bind(t);
  // Pools and their link serve the wall-clock prefill/decode pair too: used in every mode.
  t.suspend_conditions();
  link.bind(t);
  t.resume_conditions();
  faults.bind(t);
  autoscale.bind(t);
  model_routing.bind(t);
  t.suspend_conditions();
  for (PoolConfig& p : pools) p.bind(t);
  t.resume_conditions();
}

void SimulatedDriverParams::validate() const {
  fleet.validate();
  router.validate();
  link.validate();
  validate_pools(pools, model_routing.enabled());
  std::vector<std::string> names;
  std::vector<bool> unified;
  for (const PoolConfig& p : pools) {
    names.push_back(p.name);
    unified.push_back(p.takes_arrivals() && !p.hands_off_after_prefill());
  }
  model_routing.validate(names, unified);
  faults.validate(num_instances());
  // With pools, [autoscale] is what every pool's pool.NAME.autoscale.* inherits (validated there).
  if (pools.empty()) autoscale.validate(fleet.num_instances);
}

int SimulatedDriverParams::num_instances() const {
  if (pools.empty()) return fleet.num_instances;
  int n = 0;
  for (const PoolConfig& p : pools) n += p.size;
  return n;
}

SimulationStats run_simulated(Engine& engine, RequestSource& source, const ProgressFn& progress) {
  Fleet fleet({&engine}, make_router(router_choice(), RouterSetup{}));
  return fleet.run(source, progress);
}

namespace {

class SimulatedDriver : public Driver {
 public:
  SimulatedDriver(const SimulatedDriverParams& p, const DriverSetup& s) : p_(p), setup_(s) {}

  DriverStats run(const EngineFactory& make_engine, RequestSource& source, const ProgressFn& progress) override {
    std::vector<std::unique_ptr<Engine>> engines;
    const int n = p_.num_instances();
    for (int i = 0; i < n; ++i) engines.push_back(make_engine(i));
    const auto wall0 = std::chrono::steady_clock::now();  // the simulation, not the engines' construction
    std::vector<FleetPool> pools;
    // A new replica's start-up: the fixed part, then its weights per GPU at the load bandwidth.
    const auto startup_s = [&](const AutoscaleConfig& a, int tensor_parallel, const ModelConfig* model) {
      const double bytes = model ? weight_bytes_per_gpu(*model, tensor_parallel) : 0.0;
      return a.start_s + bytes / (a.load_gb_s * 1e9);
    };
    if (p_.pools.empty()) {
      FleetPool pool;
      for (auto& e : engines) pool.engines.push_back(e.get());
      pool.autoscale = p_.autoscale;
      pool.startup_s = startup_s(p_.autoscale, setup_.tensor_parallel, setup_.model);
      pools.push_back(std::move(pool));
    }
    int next = 0;
    for (size_t k = 0; k < p_.pools.size(); ++k) {
      const PoolConfig& c = p_.pools[k];
      const ModelConfig* model = k < setup_.pool_models.size() ? setup_.pool_models[k] : setup_.model;
      FleetPool pool;
      pool.name = c.name;
      pool.takes_arrivals = c.takes_arrivals();
      pool.hands_off = c.hands_off_after_prefill();
      pool.receives_handoffs = c.receives_handoffs();
      for (int k = 0; k < c.size; ++k) pool.engines.push_back(engines[next++].get());
      pool.link = c.link;
      pool.autoscale = c.autoscale;
      pool.startup_s = startup_s(c.autoscale, c.cost_model.tensor_parallel, model);
      pool.tensor_parallel = c.cost_model.tensor_parallel;
      if (model) {
        pool.kv_bytes_per_token = static_cast<double>(model->kv_bytes_per_token(activation_bytes(*model)));
        pool.num_layers = model->num_layers;
      }
      pools.push_back(std::move(pool));
    }
    for (size_t k = 0; k < pools.size(); ++k) {
      RouterSetup rs;
      rs.num_instances = static_cast<int>(pools[k].engines.size());
      rs.blocks_per_instance = pools[k].engines.front()->kv_cache().num_blocks();
      pools[k].router = make_router(p_.pools.empty() ? p_.router : p_.pools[k].router, rs);
    }
    FleetOptions options;
    options.sample_interval_s = p_.fleet.sample_interval_s;
    options.threads = p_.fleet.threads;
    options.router_refresh_s = p_.fleet.router_refresh_s;
    options.sink = setup_.sink;
    options.log_events = setup_.log_events;
    options.faults = p_.faults;
    options.model_routing = p_.model_routing;
    options.semantic_cache = setup_.semantic_cache;
    Fleet fleet(std::move(pools), options);
    const SimulationStats sim = fleet.run(source, progress);
    DriverStats stats;
    stats.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    stats.simulated_s = sim.simulated_s;
    stats.num_events = sim.num_events;
    stats.num_finished = sim.num_finished;
    stats.num_instances = n;
    return stats;
  }
  bool is_simulated() const override { return true; }

 private:
  SimulatedDriverParams p_;
  DriverSetup setup_;
};

TESTBED_REGISTER(DriverRegistry, "simulated", [](const SimulatedDriverParams& p, const DriverSetup& s) {
  return std::make_unique<SimulatedDriver>(p, s);
});

}  // namespace
}  // namespace testbed
