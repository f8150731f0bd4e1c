// Faults a fleet can be given (no anchor simulator has them):
//
//   fault.fail = 2@30, 5@60        instance 2 fails at t = 30 s, instance 5 at 60 s
//   fault.on_failure = reroute     its running and queued requests go back through
//                                  the router and are recomputed elsewhere (counted
//                                  per request as restarts); lose: they are lost
//                                  (/cancelled with reason 2, summary num_lost)
//   fault.slow = 1@10-40x3         instance 1 runs 3x slower for steps starting in [10, 40) s
//   fault.kv_event_delay_s = 0.05  KV events reach the routers 50 ms late: stale
//                                  prefix state, as a gateway behind an event bus sees it
//
// A failed instance's KV cache is gone (its routers hear AllCleared) and it
// takes no more requests; the step it was running is lost. Instance ids run
// through the pools in order (sim/fleet.h). Failures are for unified pools
// (a prefill or decode instance that fails mid-transfer is not modelled).
#pragma once

#include <string>
#include <vector>

namespace testbed {

class OptionTable;

struct FaultConfig {
  std::string fail;  // "I@T, ..."
  std::string on_failure = "reroute";
  std::string slow;  // "I@T0-T1xK, ..."
  double kv_event_delay_s = 0.0;

  struct Failure {
    int instance = 0;
    double t = 0.0;
  };
  struct Slowdown {
    int instance = 0;
    double t0 = 0.0, t1 = 0.0, factor = 1.0;
  };
  std::vector<Failure> failures() const;  // throws ConfigError naming fault.fail
  std::vector<Slowdown> slowdowns() const;  // throws ConfigError naming fault.slow
  bool lose() const { return on_failure == "lose"; }
  bool any() const { return !fail.empty() || !slow.empty() || kv_event_delay_s > 0; }

  void bind(OptionTable& table);
  // `num_instances`: the fleet's, so ids are checked.
  void validate(int num_instances) const;
};

}  // namespace testbed
