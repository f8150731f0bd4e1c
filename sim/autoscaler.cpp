#include "sim/autoscaler.h"

#include <cmath>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/common/params.h"

namespace testbed {

const char* autoscale_signal_names() {
  return "queue_depth, active_seqs, kv_usage, gpu_util, cpu_util, request_rate, ttft_p95";
}

double AutoscaleSignals::get(const std::string& name) const {
  if (name == "queue_depth") return queue_depth;
  if (name == "active_seqs") return active_seqs;
  if (name == "kv_usage") return kv_usage;
  if (name == "gpu_util") return gpu_util;
  if (name == "cpu_util") return cpu_util;
  if (name == "request_rate") return request_rate;
  if (name == "ttft_p95") return ttft_p95;
  throw ConfigError("autoscale.signal: unknown signal '" + name + "' (known: " + autoscale_signal_names() + ")");
}

int AutoscaleConfig::initial_for(int size) const { return initial_replicas > 0 ? initial_replicas : std::min(min_replicas, size); }

void AutoscaleConfig::bind(OptionTable& t) {
  policy.bind(t);
  t.add("autoscale.signal", &signal, std::string("what the policy reads (") + autoscale_signal_names() + ")");
  t.add("autoscale.min_replicas", &min_replicas, "fewest replicas");
  t.add("autoscale.max_replicas", &max_replicas, "most replicas (0: the pool's size)");
  t.add("autoscale.initial_replicas", &initial_replicas, "replicas serving at t = 0 (0: min_replicas)");
  t.add("autoscale.interval_s", &interval_s, "seconds between evaluations");
  t.add("autoscale.window_s", &window_s, "seconds of history a signal averages");
  t.add("autoscale.cooldown_s", &cooldown_s, "scale-down stabilisation: never below the highest recommendation of this long");
  t.add("autoscale.start_s", &start_s, "fixed start-up seconds of a new replica (plus its weights' load time)");
  t.add("autoscale.load_gb_s", &load_gb_s, "weight-load bandwidth per GPU, GB/s, of a new replica");
}

void AutoscaleConfig::validate(int size) const {
  policy.validate();
  AutoscaleSignals{}.get(signal);  // a known name
  require(min_replicas >= 1, "autoscale.min_replicas", "must be >= 1 (a pool with no replica cannot take a request)");
  require(max_replicas >= 0, "autoscale.max_replicas", "must be >= 0 (0: the pool's size)");
  require(max_for(size) >= min_replicas, "autoscale.max_replicas",
          "must be >= autoscale.min_replicas (" + std::to_string(min_replicas) + ")");
  require(max_for(size) <= size, "autoscale.max_replicas",
          "must be <= the pool's size (" + std::to_string(size) + "): the pool holds that many instances");
  require(initial_replicas >= 0 && (initial_replicas == 0 || (initial_replicas >= min_replicas &&
                                                             initial_replicas <= max_for(size))),
          "autoscale.initial_replicas", "must be within [min_replicas, max_replicas] (0: min_replicas)");
  const auto finite_positive = [](double v) { return v > 0 && std::isfinite(v); };
  require(finite_positive(interval_s), "autoscale.interval_s", "must be positive and finite");
  require(finite_positive(window_s) && window_s >= interval_s, "autoscale.window_s",
          "must be finite and >= autoscale.interval_s");
  require(cooldown_s >= 0 && std::isfinite(cooldown_s), "autoscale.cooldown_s", "must be >= 0 and finite");
  require(start_s >= 0 && std::isfinite(start_s), "autoscale.start_s", "must be >= 0 and finite");
  require(finite_positive(load_gb_s), "autoscale.load_gb_s", "must be positive and finite");
}

namespace {

class NoPolicy : public AutoscalePolicy {
 public:
  int desired(int current, double) const override { return current; }
};
TESTBED_REGISTER(AutoscalePolicyRegistry, "none", [](const AutoscalePolicySetup&) { return std::make_unique<NoPolicy>(); });

struct ThresholdParams : ParamsOf<ThresholdParams> {
  double up_above = -1, down_below = -1;
  int step = 1;
  void bind(OptionTable& t) override {
    t.add("autoscale.up_above", &up_above, "threshold: add replicas when the signal is above this");
    t.add("autoscale.down_below", &down_below, "threshold: remove replicas when the signal is below this");
    t.add("autoscale.step", &step, "threshold: replicas added or removed at once");
  }
  void validate() const override { require(step >= 1, "autoscale.step", "must be >= 1"); }
  void validate_selected() const override {
    require(up_above >= 0 && std::isfinite(up_above), "autoscale.up_above", "must be set (>= 0) for the threshold policy");
    require(down_below >= 0 && down_below < up_above, "autoscale.down_below",
            "must be set, >= 0 and below autoscale.up_above (" + std::to_string(up_above) + ")");
  }
};

class ThresholdPolicy : public AutoscalePolicy {
 public:
  explicit ThresholdPolicy(const ThresholdParams& p) : p_(p) {}
  int desired(int current, double signal) const override {
    if (signal > p_.up_above) return current + p_.step;
    if (signal < p_.down_below) return current - p_.step;
    return current;
  }

 private:
  ThresholdParams p_;
};
TESTBED_REGISTER(AutoscalePolicyRegistry, "threshold", [](const ThresholdParams& p, const AutoscalePolicySetup&) {
  return std::make_unique<ThresholdPolicy>(p);
});

struct TargetParams : ParamsOf<TargetParams> {
  double target = -1, tolerance = 0.1;
  void bind(OptionTable& t) override {
    t.add("autoscale.target", &target, "target: the signal's value per replica to hold");
    t.add("autoscale.tolerance", &tolerance, "target: no change within this share of the target (HPA: 0.1)");
  }
  void validate() const override {
    require(tolerance >= 0 && tolerance < 1, "autoscale.tolerance", "must be in [0, 1)");
  }
  void validate_selected() const override {
    require(target > 0 && std::isfinite(target), "autoscale.target", "must be set (> 0) for the target policy");
  }
};

class TargetPolicy : public AutoscalePolicy {
 public:
  explicit TargetPolicy(const TargetParams& p) : p_(p) {}
  int desired(int current, double signal) const override {
    const double ratio = signal / p_.target;
    if (std::abs(ratio - 1.0) <= p_.tolerance) return current;
    return static_cast<int>(std::ceil(current * ratio - 1e-9));
  }

 private:
  TargetParams p_;
};
TESTBED_REGISTER(AutoscalePolicyRegistry, "target", [](const TargetParams& p, const AutoscalePolicySetup&) {
  return std::make_unique<TargetPolicy>(p);
});

}  // namespace
}  // namespace testbed
