// Drivers own time. The wall-clock drivers run a real executor (CPU, CUDA);
// the scheduler only ever sees the `now` they pass in.
//   offline:   every request arrives at t = 0 (throughput benchmarks);
//   realtime:  requests are released when the wall clock passes their arrival;
//   simulated: (sim/) the same Engine on simulated time, one or many instances.
// With ingress.semantic_cache, offline and realtime put an Ingress
// (engine/ingress.h) in front of the engine: the model embeds each prompt and
// the cache may answer it. Offline, requests then wait at the ingress, in
// order, and are looked up as the engine takes them (it holds at most
// scheduler.max_num_seqs waiting), so a repeat can find its first copy's answer.
// Drivers register by name (driver.mode) and learn what every step did from
// its StepOutcome only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "engine/common/registry.h"
#include "engine/engine.h"
#include "engine/model/model_config.h"
#include "engine/request_source.h"
#include "engine/semantic_cache.h"

namespace testbed {

// Called after every step with the requests finished so far.
using ProgressFn = std::function<void(int64_t finished, int64_t total)>;
// Makes the engine of instance i (0, 1, ...).
using EngineFactory = std::function<std::unique_ptr<Engine>(int instance)>;

struct DriverStats {
  double wall_s = 0.0;       // wall-clock duration of the run
  double simulated_s = 0.0;  // simulated time (simulated drivers)
  int64_t num_events = 0;    // simulated drivers
  int num_instances = 1;
  int64_t num_finished = 0;  // incl. requests the ingress cache answered
  // Wall-clock drivers with the ingress cache: each lookup's measured seconds
  // (the model's embedding + the search), by request id (Ingress::lookup_seconds).
  std::vector<std::pair<int64_t, double>> ingress_s;
};

class Driver {
 public:
  virtual ~Driver() = default;
  // Runs every request of `source` through the engines it makes, until all finished.
  virtual DriverStats run(const EngineFactory& make_engine, RequestSource& source, const ProgressFn& progress) = 0;
  virtual bool is_simulated() const = 0;
};

struct DriverSetup {
  MetricsSink* sink = nullptr;            // where fleet-level samples (and request events) go
  bool log_events = false;                // report RequestEvents (output.events)
  const ModelConfig* model = nullptr;     // the model every engine runs (KV bytes per token, layers)
  int tensor_parallel = 1;                // of the fleet without pools (a new replica loads weights / TP per GPU)
  std::vector<const ModelConfig*> pool_models;  // each pool's model, in order (empty: `model` for every pool)
  // Wall-clock drivers: instance 0 prefills and hands off, instance 1 decodes (run_disaggregated).
  bool disaggregated = false;
  // ingress.semantic_cache and its keys: the fleet's ingress (simulated) or engine/ingress.h (offline, realtime).
  SemanticCacheConfig semantic_cache;
};

using DriverRegistry = Registry<Driver, const DriverSetup&>;

class Ingress;

// The wall-clock loops on one engine; both return the run's duration in seconds.
// `ingress` (optional) answers what it can before the engine sees it;
// *num_finished counts its answers too.
double run_offline(Engine& engine, RequestSource& source, const ProgressFn& progress, int64_t* num_finished = nullptr,
                   Ingress* ingress = nullptr);
double run_realtime(Engine& engine, RequestSource& source, const ProgressFn& progress, int64_t* num_finished = nullptr,
                    Ingress* ingress = nullptr);
// Prefill/decode disaggregation on the wall clock, in one process:
// `prefill` (hand_off_after_prefill) takes the arrivals (all at t = 0 when
// offline) and `decode` generates the rest, each on its own thread, so their
// steps overlap as two devices' would (engine/disaggregated_driver.cpp). Each
// handed-off sequence's missing KV blocks are copied from one executor into
// the other and timed (Sequence::handoff); a hand-off waits while `decode` has
// no room. The generated tokens are one engine's: the fidelity anchor of the
// simulated hand-off.
double run_disaggregated(Engine& prefill, Engine& decode, RequestSource& source, bool offline,
                         const ProgressFn& progress, int64_t* num_finished = nullptr);

}  // namespace testbed
