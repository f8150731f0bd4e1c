// Autoscaling a pool on inference signals. Every autoscale.interval_s the
// fleet measures the pool's signals over the last autoscale.window_s and the
// chosen policy (autoscale.policy, one registry: one class per policy below)
// sets the replica count between autoscale.min_replicas and max_replicas:
//
//   signal (autoscale.signal)  per active replica, averaged over the window
//   queue_depth                requests waiting in the scheduler
//   active_seqs                sequences running
//   kv_usage                   share of KV blocks in use
//   gpu_util                   share of the window spent in steps (nvidia-smi's "utilization")
//   cpu_util                   share of the window holding any request: a serving
//                              process's busy-polling engine loop, the CPU-utilisation
//                              signal seed 001 calls a poor one (it saturates at any load)
//   request_rate               arrivals per second per replica
//   ttft_p95                   TTFT p95 (s) of the requests whose first token came in the window
//
//   threshold   one replica (autoscale.step) up when the signal > up_above, down when < down_below
//   target      Kubernetes HPA's rule: ceil(current x signal / target), unchanged within
//               autoscale.tolerance of the target (0.1, HPA's default)
//
// A new replica serves after autoscale.start_s + weights / autoscale.load_gb_s
// (its weights loaded at that bandwidth per GPU); a removed one drains first
// (takes no request, finishes its own) and then goes off with its cache
// cleared. Scale-down never goes below the highest recommendation of the last
// autoscale.cooldown_s (HPA's scale-down stabilisation window, 300 s there). In a
// config: [autoscale] for the fleet of fleet.num_instances, or
// pool.NAME.autoscale.* per pool; the pool's size is its most replicas.
#pragma once

#include <memory>
#include <string>

#include "engine/common/choice.h"
#include "engine/common/registry.h"

namespace testbed {

class OptionTable;

// A pool's signals at one evaluation (see the table above).
struct AutoscaleSignals {
  double queue_depth = 0, active_seqs = 0, kv_usage = 0, gpu_util = 0, cpu_util = 0, request_rate = 0, ttft_p95 = 0;
  // The signal named `name` (one of autoscale_signal_names()).
  double get(const std::string& name) const;
};
// "queue_depth, active_seqs, ...", in the table's order.
const char* autoscale_signal_names();

class AutoscalePolicy {
 public:
  virtual ~AutoscalePolicy() = default;
  // Replicas wanted, given `current` (active + starting) and the signal's value.
  virtual int desired(int current, double signal) const = 0;
};
struct AutoscalePolicySetup {};
using AutoscalePolicyRegistry = Registry<AutoscalePolicy, const AutoscalePolicySetup&>;

struct AutoscaleConfig {
  Choice<AutoscalePolicyRegistry> policy{"autoscale.policy", "none", "replica-count policy"};
  std::string signal = "queue_depth";
  int min_replicas = 1;
  int max_replicas = 0;      // 0: the pool's size
  int initial_replicas = 0;  // 0: min_replicas
  double interval_s = 10.0, window_s = 30.0, cooldown_s = 120.0;
  double start_s = 30.0;    // fixed start-up (container, runtime, warm-up)
  double load_gb_s = 2.0;   // weight-load bandwidth per GPU (GB/s)

  bool enabled() const { return policy.name != "none"; }
  // The bounds for a pool of `size` instances.
  int max_for(int size) const { return max_replicas > 0 ? max_replicas : size; }
  int initial_for(int size) const;
  void bind(OptionTable& table);
  // `size`: the pool's instances (the most replicas it can have).
  void validate(int size) const;
};

}  // namespace testbed
