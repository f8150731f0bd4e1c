// Arrival processes (see arrivals.h).
#include "traces/arrivals.h"

#include "engine/common/config_error.h"

namespace testbed {

ArrivalProcess::ArrivalProcess(const std::string& kind, double rate, double burstiness, uint64_t seed,
                               const std::string& key)
    : kind_(kind), rate_(rate), shape_(burstiness), rng_(seed) {
  require(kind == "poisson" || kind == "gamma" || kind == "constant", key,
          "unknown arrival process '" + kind + "' (known: constant, gamma, poisson)");
  require(rate >= 0, "workload.rate", "must be >= 0 (0 = all at t=0)");
  require(burstiness > 0, "workload.burstiness", "must be positive");
}

double ArrivalProcess::next() {
  if (rate_ <= 0) return 0.0;
  const double now = t_;
  if (kind_ == "poisson")
    t_ += rng_.exponential(rate_);
  else if (kind_ == "gamma")
    t_ += rng_.gamma(shape_, 1.0 / (rate_ * shape_));  // mean shape * scale = 1 / rate
  else
    t_ += 1.0 / rate_;
  return now;
}

}  // namespace testbed
