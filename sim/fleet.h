// Fleet: a cluster of pools of serving instances on one discrete-event loop.
// Each instance is a full Engine (the same Scheduler and KvCacheManager as a
// real run); each pool has its own router (sim/pool.h for the roles).
//
// A request's life, each step a named event (RequestEvent, in the results'
// /events with output.events = true) at its rank in the loop (sim/event_loop.h):
//
//   arrival      (kRankArrival)   the request reaches the ingress
//   cache_answer (kRankTransfer)  the ingress's response cache answers it, ingress.lookup_s
//                                 later (a miss reaches the router that much later)
//   route                         its router picks the instance
//   first_token  (kRankStepEnd)   the step that completes the prefill ends
//   prefill_done                  a prefill instance hands the sequence off: its
//                                 blocks stay allocated there (export_blocks)
//   decode_route                  the decode router picks the instance, which
//                                 reserves blocks for it (import_blocks), reusing
//                                 its prefix cache; with no room anywhere the
//                                 hand-off waits (back-pressure), in order, and is
//                                 retried after each decode step
//   transfer_start                the missing blocks' KV starts over the link (sim/kv_link.h)
//   transfer_done (kRankTransfer) the decode instance holds the KV; the prefill
//                                 instance's blocks are free again
//   finish       (kRankStepEnd)   the step that samples the last token ends
//   fail         (kRankTransfer)  an instance fails (sim/faults.h): its requests are
//                                 routed again (restart) or lost (cancel)
//   cancel                        the client left (Request::cancel_after_s, at
//                                 the instance's next step; cancel_after_tokens,
//                                 at the step delivering that token; a hand-off
//                                 waiting for room, when it is next looked at)
//
// A fleet of one unified instance is the single-engine simulation.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/driver.h"
#include "engine/engine.h"
#include "engine/request_source.h"
#include "engine/semantic_cache.h"
#include "sim/autoscaler.h"
#include "sim/event_loop.h"
#include "sim/faults.h"
#include "sim/kv_link.h"
#include "sim/model_router.h"
#include "sim/pool.h"
#include "sim/router.h"

namespace testbed {

class OptionTable;

constexpr int kMaxThreads = 64;  // fleet.threads

struct FleetConfig {
  int num_instances = 1;
  double sample_interval_s = 0.0;  // KV usage / queue samples per instance (0: none)
  int threads = 1;                 // threads stepping instances between routing decisions (FleetOptions::threads)
  double router_refresh_s = 0.0;   // FleetOptions::router_refresh_s
  void bind(OptionTable& table);
  void validate() const;
};

struct SimulationStats {
  double simulated_s = 0.0;
  int64_t num_events = 0;
  int64_t num_finished = 0;
  int64_t num_cancelled = 0;  // cancelled by their clients, or lost with a failed instance
  int64_t num_lost = 0;       // of which lost (fault.on_failure = lose)
  int64_t num_rejected = 0;   // requests that could never run (trace.on_invalid = reject)
  int64_t num_restarts = 0;   // requests started over after a failure (fault.on_failure = reroute)
  int64_t num_handoffs = 0;
};

// One pool as the fleet runs it.
struct FleetPool {
  std::string name = "main";
  // Its role (sim/pool.h), as the fleet needs it: a unified pool takes arrivals only.
  bool takes_arrivals = true, hands_off = false, receives_handoffs = false;
  std::vector<Engine*> engines;  // engine k has instance id (first id of the pool) + k
  std::unique_ptr<Router> router;
  // Decode pools: the link KV arrives over and what it carries.
  KvLinkConfig link;
  int tensor_parallel = 1;
  double kv_bytes_per_token = 0.0;  // the whole model's K and V per token (every TP rank)
  int num_layers = 1;
  // Autoscaling (sim/autoscaler.h): engines are the most replicas; a new one
  // serves startup_s after it is asked for (start_s + weights per GPU / load bandwidth).
  AutoscaleConfig autoscale;
  double startup_s = 0.0;
};

struct FleetOptions {
  double sample_interval_s = 0.0;
  MetricsSink* sink = nullptr;  // samples, and request events when log_events
  bool log_events = false;
  FaultConfig faults;  // failures, stragglers, late KV events (sim/faults.h)
  ModelRoutingConfig model_routing;  // several ingress pools, one per request class (sim/model_router.h)
  SemanticCacheConfig semantic_cache;  // the ingress's response cache (engine/semantic_cache.h)
  // Threads that step instances (sim/fleet_windows.cpp). Results are the same,
  // bit for bit, for any number: more than one needs unified pools without
  // autoscaling or an ingress cache, and sinks that can defer (MetricsSink::make_deferred).
  int threads = 1;
  // Seconds between refreshes of what the routers see (0: every change, at
  // once). Set, the routers see each instance's load as read at the last
  // refresh, plus the requests they sent it since, and their KV events arrive
  // in one batch per refresh, as a router that polls its instances' metrics
  // and drains its event queue every so often. A refresh at time T comes after
  // everything else at T; a request arriving in (T, T + refresh] is routed
  // with the view of T (at T: it is decided then, and lands when it arrives).
  // Nothing the routers read changes between refreshes, so a window of several
  // threads (sim/fleet_windows.cpp) spans the whole interval. Unified pools
  // only, without failures, autoscaling, an ingress cache or late KV events.
  double router_refresh_s = 0.0;
};

class Fleet {
 public:
  // Instance ids run through the pools in order (pool 0's instances first);
  // each engine's instance() must be its id.
  Fleet(std::vector<FleetPool> pools, FleetOptions options);
  // One unified pool: `engines` are instances 0..n-1 (all with the same block size).
  Fleet(std::vector<Engine*> engines, std::unique_ptr<Router> router, double sample_interval_s = 0.0,
        MetricsSink* sink = nullptr);
  ~Fleet();

  // Throws ConfigError when requests remain that can never run (a decode pool
  // that cannot hold a handed-off sequence, a configuration deadlock).
  SimulationStats run(RequestSource& source, const ProgressFn& progress);
  // Requests routed to each instance (decode instances: hand-offs received).
  const std::vector<int64_t>& routed() const { return routed_; }
  int num_instances() const { return static_cast<int>(instances_.size()); }
  // Pool p's router (tests: its prefix index after a run).
  const Router& router(int pool) const;

 private:
  struct Instance;
  struct Pool;
  struct PendingHandOff;
  class EventForwarder;
  class WindowTeam;
  // Several threads (sim/fleet_windows.cpp): the loop runs in windows, each
  // the instances' step events before the next event of anything else. Each
  // instance's events run on a worker, their reports kept; then the reports
  // are delivered, and the events numbered, in the order one thread would have run them.
  void run_windows();
  void step_window(int i);
  void window_start(int i, double now);
  void window_end(int i, double end);
  void replay_window(WindowTeam& team);
  // The merge itself; `apply_aside` takes the routers' KV events (null: they go to the routers here,
  // unless `kv_applied`: the team applied them as the instances were stepped).
  void merge_window(WindowTeam* apply_aside, bool kv_applied = false);
  // Instance i's KV events of the window, all at once, to its router (one that commutes them).
  void apply_window_kv(int i);
  // On a worker, once the window's KV events are applied: Router::prepare for
  // the pending arrival, when it is the next event (the window's limit).
  void prepare_next_route();
  void clear_window();
  // `instance`: the log entry's instance when it is not the event's (kLogNoInstance: none).
  void keep_log(Instance& inst, RequestEvent::Kind kind, int64_t request, int instance = kLogOwnInstance);
  static constexpr int kLogOwnInstance = -2, kLogNoInstance = -1;
  // A request routed ahead lands on instance i at its arrival, on a worker.
  void window_land(int i, double now);
  bool in_window(double t, int rank) const {
    return !window_has_limit_ || t < window_limit_t_ || (t == window_limit_t_ && rank < window_limit_rank_);
  }
  // The source's next request, its order checked (none: source_done_).
  std::optional<Request> read_request();
  void pull_next_arrival();
  // FleetOptions::router_refresh_s: refresh k (at k * refresh) renews the
  // routers' view of the loads and routes the requests arriving until the
  // next; each lands at its arrival (land). Only the refreshes that route a
  // request are run: one that none reads changes nothing. The KV events reach the routers
  // as they are published: no routing decision comes before the next
  // refresh, so the routers decide on what was published by then.
  void refresh(double now);
  void route_ahead(double until);
  void land(int i, double now);
  // The instance a request goes to (the class router, then the pool's; a
  // choice that takes none overruled), -1 when none can take it.
  int choose_instance(Request& request, double now);
  // `restart`: a request started over after its instance failed (not a new arrival).
  void arrive(Request request, double now, bool restart = false);
  // Model routing and instance routing: the request enters an engine.
  void place(Request request, double now);
  void fail(int i, double now);
  // Reports a request that can be served nowhere (every instance failed) as lost.
  void lose(Request request, double now);
  void forward_kv_event(Router& router, int local, const KvEvent& e);
  // Autoscaling: one evaluation of pool p, replicas in and out, and their states' changes.
  void evaluate(int p, double now);
  void measure(Pool& pool, double now, AutoscaleSignals& out);
  void scale_up(Pool& pool, int n, double now);
  void scale_down(Pool& pool, int n, double now);
  void start_replica(int i, double now);
  void turn_off(int i, double now);
  void report_scale(int p, double now, int desired, double signal, const AutoscaleSignals& s);
  struct ReplicaCount {
    int active = 0, starting = 0, draining = 0;
  };
  // A pool's replicas by state, failed ones left out.
  ReplicaCount count_replicas(const Pool& pool) const;
  bool requests_outstanding() const;
  void kick(int i, double now);
  void start_kicked(int i, double now);  // the event a kick made
  // A step's start on instance i that stays on it: schedule, execute, stragglers;
  // false when nothing was scheduled (throws on a deadlock).
  bool plan_step(int i, double now);
  void start_step(int i, double now);
  void end_step(int i, double end);
  void hand_off(int from, HandOff h, double now, double overlap_s);
  void dispatch_handoffs(Pool& pool, double now);
  bool try_import(Pool& pool, int local, PendingHandOff& p, double now);
  void transfer_done(int from, int to, int64_t seq_id, double now);
  void sample(double now);
  void log(RequestEvent::Kind kind, double t, int64_t request, int instance, int64_t bytes = 0);
  // The loads a pool's router reads. They are kept per pool and refreshed only
  // for the instances touched since the last decision, so a decision costs
  // what changed, not the fleet's size (debug builds check them against a
  // fresh reading every time).
  const std::vector<InstanceLoad>& loads(Pool& pool);
  // Instance i's engine or state may have changed: its load is read again before the next decision.
  void touch(int i) {
    if (!is_touched_[i]) {
      is_touched_[i] = 1;
      touched_.push_back(i);
    }
  }
  InstanceLoad read_load(int i) const;
  // Loading ahead (EventLoop::set_lookahead): with 1,024 instances, one is
  // out of the cache by its next step, and its step reads some thirty
  // scattered lines (its records, its engine, their buffers) one cold miss
  // after another. Two stages, an event apart: the records themselves, then
  // what they point to, read from the loaded records (engine/common/load_ahead.h).
  // Neither changes anything.
  void load_records(int i) const;
  void load_buffers(int i) const;
  static void lookahead(void* fleet, int next_owner, int after_owner);

  std::vector<std::unique_ptr<Pool>> pools_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<const Engine*> engine_of_;  // instances_[i]->engine, beside the instances (load_records)
  std::vector<std::unique_ptr<EventForwarder>> forwarders_;
  Pool* ingress_ = nullptr;
  std::vector<Pool*> class_pools_;  // model routing: the pool of each class
  std::unique_ptr<ClassRouter> class_router_;
  std::unique_ptr<SemanticCache> cache_;  // made at the first arrival (its embedding size is the cache's)
  std::vector<int32_t> prompt_buffer_;
  Pool* decode_ = nullptr;
  FleetOptions options_;
  EventLoop loop_;
  RequestSource* source_ = nullptr;
  const ProgressFn* progress_ = nullptr;
  int64_t total_ = -1, added_ = 0, finished_ = 0, cancelled_ = 0, lost_ = 0, rejected_ = 0, restarts_ = 0, handoffs_ = 0;
  double last_arrival_ = 0.0;
  bool source_done_ = false;
  std::vector<int64_t> routed_;
  std::vector<int> touched_;       // instances whose loads are stale (touch)
  std::vector<char> is_touched_;
  KvImport import_plan_;
  // router_refresh_s: the refresh the next one is, and the request read but not yet routed.
  int64_t refresh_k_ = 0;
  std::optional<Request> next_request_;
  std::vector<int> window_;  // the instances with events in this window
  bool window_has_limit_ = false;
  double window_limit_t_ = 0.0;
  int window_limit_rank_ = 0;
  // Every router that takes KV events commutes them (Router::kv_events_commute)
  // and none is delayed: a window's are applied as its instances are stepped.
  bool kv_apply_stepped_ = false;
  Request* pending_arrival_ = nullptr;  // the next arrival's request, scheduled (pull_next_arrival)
};

}  // namespace testbed
