// Arrival processes (see arrivals.h).
#include "traces/arrivals.h"

#include <cmath>
#include <string>

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

ArrivalProcess::ArrivalProcess(std::vector<double> gaps, double rate, const std::string& what)
    : kind_("trace"), rate_(rate), shape_(1.0), rng_(0), gaps_(std::move(gaps)) {
  require(rate >= 0, "workload.rate", "must be >= 0 (0 = all at t=0)");
  double sum = 0.0;
  for (double g : gaps_) sum += g;
  if (rate_ <= 0) return;
  if (gaps_.empty() || !(sum > 0) || !std::isfinite(sum))
    throw ConfigError(what + ": workload.arrival = trace needs arrivals spread over time, but its " +
                      std::to_string(gaps_.size() + 1) + " rows arrive at one instant");
  const double scale = static_cast<double>(gaps_.size()) / (sum * rate_);  // mean gap -> 1 / rate
  for (double& g : gaps_) g *= scale;
}

double ArrivalProcess::next() {
  if (rate_ <= 0) return 0.0;
  const double now = t_;
  if (kind_ == "trace") {
    t_ += gaps_[next_gap_];
    next_gap_ = next_gap_ + 1 == gaps_.size() ? 0 : next_gap_ + 1;
  } else if (kind_ == "poisson")
    t_ += rng_.exponential(rate_);
  else if (kind_ == "gamma")
    t_ += rng_.gamma(shape_, 1.0 / (rate_ * shape_));  // mean shape * scale = 1 / rate
  else
    t_ += 1.0 / rate_;
  return now;
}

}  // namespace testbed
