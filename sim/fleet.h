// Fleet: N serving instances behind a router, on one discrete-event loop.
// Each instance is a full Engine (the same Scheduler and KvCacheManager as a
// real run); arrivals are routed the moment they arrive; each instance's step
// completion is an event at start + the executor's duration. A fleet of one
// instance is the single-engine simulation (the simulated driver uses it).
#pragma once

#include <memory>
#include <vector>

#include "engine/driver.h"
#include "engine/engine.h"
#include "engine/request_source.h"
#include "sim/event_loop.h"
#include "sim/router.h"

namespace testbed {

class OptionTable;

struct FleetConfig {
  int num_instances = 1;
  double sample_interval_s = 0.0;  // KV usage / queue samples per instance (0: none)
  void bind(OptionTable& table);
  void validate() const;
};

struct SimulationStats {
  double simulated_s = 0.0;
  int64_t num_events = 0;
  int64_t num_finished = 0;
};

class Fleet {
 public:
  // `engines` are instances 0..n-1 (all with the same block size); `sink` gets the samples.
  Fleet(std::vector<Engine*> engines, std::unique_ptr<Router> router, double sample_interval_s = 0.0,
        MetricsSink* sink = nullptr);
  ~Fleet();

  SimulationStats run(RequestSource& source, const ProgressFn& progress);
  // Requests routed to each instance.
  const std::vector<int64_t>& routed() const { return routed_; }

 private:
  struct Instance;
  class EventForwarder;
  void pull_next_arrival();
  void arrive(Request request, double now);
  void kick(int i, double now);
  void start_step(int i, double now);
  void end_step(int i, double end);
  void sample(double now);
  std::vector<InstanceLoad> loads() const;

  std::vector<std::unique_ptr<Instance>> instances_;
  std::unique_ptr<Router> router_;
  std::vector<std::unique_ptr<EventForwarder>> forwarders_;
  double sample_interval_s_;
  MetricsSink* sink_;
  EventLoop loop_;
  RequestSource* source_ = nullptr;
  const ProgressFn* progress_ = nullptr;
  int64_t total_ = -1, added_ = 0, finished_ = 0;
  double last_arrival_ = 0.0;
  std::vector<int64_t> routed_;
  std::vector<InstanceLoad> loads_;
};

}  // namespace testbed
