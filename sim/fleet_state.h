// The fleet's private state (sim/fleet.h): its instances, pools and pending
// hand-offs, shared by the files that implement Fleet (fleet.cpp: arrivals,
// routing, steps, hand-offs, faults; fleet_autoscale.cpp: autoscaling).
#pragma once

#include <deque>
#include <exception>
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
  // Stepping on several threads (Fleet::run_windows): this window's events of
  // the instance as its worker ran them, each with marks of what it reported
  // (to the sink, the router, the events log) for the replay to deliver.
  struct WindowEvent {
    double t = 0.0;
    int rank = 0;
    uint64_t seq = 0;            // the loop's number (a spawned one's: given at its parent's replay)
    bool progress = false;       // a step ended (the progress callback runs)
    bool spawns = false;         // it scheduled an event of the instance at spawn_t: a step's end or start
    bool spawn_in_window = false;  // ... which is in this list, at spawn_index
    double spawn_t = 0.0;
    int spawn_rank = kRankStepEnd;
    size_t spawn_index = 0;
    int landed = 0, rejected = 0;  // a request landed (router_refresh_s); the engine refused it
    int64_t finished = 0;
    int64_t cancelled = 0, cancelled_later = 0;  // in the step that ended / the step that started
    size_t sink_end = 0, kv_end = 0, log_end = 0;
    std::exception_ptr error;  // what it threw (rethrown where one thread would have)
  };
  std::vector<WindowEvent> taken;   // the window's events taken from the loop, in order
  std::vector<WindowEvent> window;  // all its events of the window as the worker ran them (taken and spawned)
  std::deque<Request> landings;     // requests routed to it ahead (router_refresh_s), in arrival order
  EventForwarder* forwarder = nullptr;      // its KV events' way to the router (none: the router takes none)
  std::unique_ptr<DeferredSink> deferred;  // lent to the engine while its worker runs
  std::vector<KvEvent> kv_buffer;          // its KV events for the router, in order
  std::vector<size_t> kv_batches;          // where each batch the engine published ends
  size_t kv_delivered = 0, kv_batches_delivered = 0;
  // The event log's entries at the event's time, each after the sink's reports before it (sink_mark).
  struct Log {
    RequestEvent::Kind kind;
    int64_t request;
    size_t sink_mark;
    int instance;  // Fleet::kLogOwnInstance: the event's
  };
  std::vector<Log> logs;
  size_t logs_delivered = 0;
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
  void on_kv_event(const KvEvent& e) override {
    if (buffer) {
      buffer->push_back(e);
      batches->push_back(buffer->size());
    } else
      fleet_.forward_kv_event(router_, local_, e);
  }
  void on_kv_events(const KvEvent* events, size_t n) override {
    if (buffer) {
      buffer->insert(buffer->end(), events, events + n);
      batches->push_back(buffer->size());
      return;
    }
    deliver(events, n);
  }
  void deliver(const KvEvent* events, size_t n) {
    if (fleet_.options_.faults.kv_event_delay_s > 0)
      for (size_t i = 0; i < n; ++i) fleet_.forward_kv_event(router_, local_, events[i]);
    else
      router_.on_kv_events(local_, events, n);
  }

  // A worker's window (Fleet::run_windows): events are kept here, delivered at the replay.
  std::vector<KvEvent>* buffer = nullptr;
  std::vector<size_t>* batches = nullptr;  // where each call's events end in buffer

 private:
  Fleet& fleet_;
  Router& router_;
  int local_;
};

}  // namespace testbed
