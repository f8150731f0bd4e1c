// The fleet's private state (sim/fleet.h): its instances, pools and pending
// hand-offs, shared by the files that implement Fleet (fleet.cpp: arrivals,
// routing, steps, hand-offs, faults; fleet_autoscale.cpp: autoscaling).
#pragma once

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "sim/fleet.h"

namespace testbed {

struct Fleet::Instance {
  Engine* engine = nullptr;
  int pool = 0, local = 0;  // its pool and its index there
  bool busy = false;
  bool start_pending = false;
  bool failed = false;
  // Autoscaling: only an active replica takes requests; starting, draining and active ones are paid for.
  enum class State { Active, Starting, Draining, Off } state = State::Active;
  double busy_s = 0.0;  // step seconds so far (the GPU-utilisation signal)
  uint32_t starts = 0;  // start-ups asked for: a stale start-up event (scaled down before it came) is dropped
  uint32_t generation = 0;  // bumped when it fails: the end of the step it was running is dropped
  std::vector<FaultConfig::Slowdown> slow;  // its straggler windows
  // The step in flight (an instance runs one at a time): kept here, not in the
  // event, so the completion event captures only (this, i).
  StepPlan plan;
  StepResult result;
  StepOutcome outcome;  // reused step after step
};

// A sequence waiting for room on the decode side, its KV held where it was prefilled.
struct Fleet::PendingHandOff {
  int from = 0;
  double overlap_s = 0.0;  // the last prefill step's duration (layer-wise transfer hides behind it)
  HandOff h;
};

struct Fleet::Pool {
  FleetPool spec;
  int first = 0;  // instance id of engines[0]
  std::deque<PendingHandOff> waiting;  // decode pools: hand-offs without room yet, in arrival order
  // Autoscaling: the chosen policy, what the window holds, and the last change.
  std::unique_ptr<AutoscalePolicy> policy;
  struct Tick {
    double t, queue, running, kv, holding, busy_s;
    int active;
  };
  std::deque<Tick> ticks;
  std::deque<double> arrivals;                    // times, within the window
  std::deque<std::pair<double, double>> ttfts;    // (first token time, TTFT), within the window
  std::deque<std::pair<double, int>> recommendations;  // (time, desired), within autoscale.cooldown_s
  std::vector<InstanceLoad> loads;  // what its router reads (Fleet::loads)
};

// Hands one instance's KV events to its pool's router, tagged with its index
// there: at once, or fault.kv_event_delay_s later.
class Fleet::EventForwarder : public KvEventListener {
 public:
  EventForwarder(Fleet& fleet, Router& router, int local) : fleet_(fleet), router_(router), local_(local) {}
  void on_kv_event(const KvEvent& e) override { fleet_.forward_kv_event(router_, local_, e); }
  void on_kv_events(const KvEvent* events, size_t n) override {
    if (fleet_.options_.faults.kv_event_delay_s > 0)
      for (size_t i = 0; i < n; ++i) fleet_.forward_kv_event(router_, local_, events[i]);
    else
      router_.on_kv_events(local_, events, n);
  }

 private:
  Fleet& fleet_;
  Router& router_;
  int local_;
};

}  // namespace testbed
