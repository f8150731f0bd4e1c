// Arrival processes: inter-arrival gaps for a given rate.
//   poisson:  exponential gaps (CV 1);
//   gamma:    gamma gaps of shape k (CV^2 = 1/k), the burstiness knob of BurstGPT
//             and vLLM's benchmark (k < 1: bursts; k = 1: Poisson);
//   constant: equal gaps;
//   trace:    a recorded trace's gaps in order (cycled when it runs out),
//             scaled so that their mean is 1 / rate: the trace's burstiness
//             and lulls at the rate of the simulated fleet (workload.kind = mix).
// Rate 0 puts every arrival at t = 0. The first arrival is at t = 0.
#pragma once

#include <string>
#include <vector>

#include "engine/common/rng.h"

namespace testbed {

class ArrivalProcess {
 public:
  // `key` names the config key of `kind` in errors (workload.arrival, trace.arrivals).
  ArrivalProcess(const std::string& kind, double rate, double burstiness, uint64_t seed,
                 const std::string& key = "workload.arrival");
  // kind trace: `gaps` (>= 0, mean > 0) replayed at `rate`; `what` names
  // their source in errors.
  ArrivalProcess(std::vector<double> gaps, double rate, const std::string& what);
  double next();  // arrival time of the next request

 private:
  std::string kind_;
  double rate_, shape_, t_ = 0.0;
  Rng rng_;
  std::vector<double> gaps_;  // trace: already scaled to the rate
  size_t next_gap_ = 0;
};

}  // namespace testbed
