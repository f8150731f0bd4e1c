// MetricsSink: the one interface through which every engine, real or simulated,
// reports what happened. Analysis reads the files a sink writes, never internals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/kv_event.h"
#include "engine/sequence.h"

namespace testbed {

struct StepRecord {
  int instance = 0;
  double start_s = 0.0;
  double duration_s = 0.0;
  int num_seqs = 0;
  int prefill_tokens = 0;
  int decode_tokens = 0;
  int kv_blocks_used = 0;
  int kv_block_size = 0;     // tokens per block: kv_blocks_used x kv_block_size slots
  int64_t kv_tokens = 0;     // tokens the running sequences hold after the step (each sequence's own)
  int num_preempted = 0;
  int num_waiting = 0;  // after the step
  int num_running = 0;  // after the step
  // Speculative decoding: proposed tokens verified and accepted; decode items
  // that appended tokens, and the tokens they appended (1 + accepted each).
  int draft_tokens = 0, accepted_tokens = 0, decode_items = 0, decode_appended = 0;
};

// An instance's state, sampled at a fixed interval by the simulator.
struct InstanceSample {
  double t = 0.0;
  int instance = 0;
  double kv_usage = 0.0;
  int num_waiting = 0;
  int num_running = 0;
};

// A pool's replicas and signals at one autoscaler evaluation (sim/autoscaler.h).
struct ScaleSample {
  double t = 0.0;
  int pool = 0;
  int active = 0, starting = 0, draining = 0;  // replicas in each state (paid for: all three)
  int desired = 0;                             // what the policy asked for, within the bounds
  double signal = 0.0;                         // the policy's signal
  // Every signal, so a run shows what each would have said.
  double queue_depth = 0, active_seqs = 0, kv_usage = 0, gpu_util = 0, cpu_util = 0, request_rate = 0, ttft_p95 = 0;
  int paid() const { return active + starting + draining; }
};

// A named moment in a request's life as the fleet sees it, in event-loop order:
//   arrival -> route -> first_token -> [prefill_done -> decode_route ->
//   transfer_start -> transfer_done ->] finish | cancel
// (the bracketed ones only when a prefill pool hands the request to a decode pool).
struct RequestEvent {
  enum class Kind { Arrival, Route, FirstToken, PrefillDone, DecodeRoute, TransferStart, TransferDone, Finish, Cancel, Fail,
                    ReplicaStart, ReplicaReady, ReplicaDrain, ReplicaOff, CacheAnswer };
  Kind kind = Kind::Arrival;
  double t = 0.0;
  int64_t request = 0;
  int instance = -1;  // where it happens (route: the chosen instance; transfers: the receiver)
                      // fail, replica_*: the instance, with request -1 (sim/faults.h, sim/autoscaler.h)
  int64_t bytes = 0;  // transfer_start: bytes moved
};
const char* request_event_name(RequestEvent::Kind kind);

// Why a request ended without finishing.
enum class CancelReason : int32_t {
  Deadline = 0,  // its client disconnected after Request::cancel_after_s
  Tokens = 1,    // its client disconnected after Request::cancel_after_tokens tokens
  Lost = 2,      // its instance failed and the fleet does not re-route (fault.on_failure = lose)
  Rejected = 3,  // it could never run (longer than the model or the KV cache: EngineConfig::on_invalid = reject)
};
const char* cancel_reason_name(CancelReason reason);

class DeferredSink;

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // A DeferredSink that delivers to this sink later, or null when this sink
  // cannot defer its reports (a fleet then refuses fleet.threads > 1).
  virtual std::unique_ptr<DeferredSink> make_deferred() { return nullptr; }
  virtual void on_arrival(int /*instance*/, const Sequence& /*seq*/, double /*t*/) {}
  virtual void on_step(const StepRecord& /*step*/) {}
  virtual void on_first_token(int /*instance*/, const Sequence& /*seq*/, double /*t*/) {}
  // Tokens after the first reach the client: once per step (several tokens at
  // once when proposed tokens were accepted); gap_s since the previous delivery.
  virtual void on_token(int /*instance*/, const Sequence& /*seq*/, double /*t*/, double /*gap_s*/) {}
  // True when all this sink does with on_token is take its gap_s, in order,
  // whatever else it hears meanwhile. An engine then reports a step's gaps in
  // one on_token_gaps call, after the step's other per-sequence reports and
  // before on_step (a virtual call per token was 4% of a lone instance's time
  // on the Azure trace).
  virtual bool takes_token_gaps_only() const { return false; }
  virtual void on_token_gaps(int /*instance*/, const double* /*gaps*/, size_t /*n*/) {}
  virtual void on_finish(int /*instance*/, const Sequence& /*seq*/, double /*t*/) {}
  // The ingress answered `request` from its response cache at t (engine/semantic_cache.h):
  // an arrival and a finish in one, no engine involved. `correct`: the answer's intent is the request's.
  virtual void on_cache_answer(const Request& /*request*/, double /*t*/, bool /*semantic*/, bool /*correct*/) {}
  // The request left unfinished at t: its blocks are free.
  virtual void on_cancel(int /*instance*/, const Sequence& /*seq*/, double /*t*/, CancelReason /*reason*/) {}
  virtual void on_kv_event(int /*instance*/, const KvEvent& /*event*/) {}
  // One drain's events, in order (one call where a sink only counts them).
  virtual void on_kv_events(int instance, const KvEvent* events, size_t n) {
    for (size_t i = 0; i < n; ++i) on_kv_event(instance, events[i]);
  }
  // True when all this sink does with KV events is count the blocks stored
  // and removed. An engine that no router listens to then keeps two counts
  // instead of the events, and reports a drain with on_kv_counts (the
  // events cost a lone instance on the Azure trace 3% of its time).
  virtual bool counts_kv_events_only() const { return false; }
  virtual void on_kv_counts(int /*instance*/, int64_t /*stored*/, int64_t /*removed*/) {}
  virtual void on_sample(const InstanceSample& /*sample*/) {}
  virtual void on_scale(const ScaleSample& /*sample*/) {}
  virtual void on_request_event(const RequestEvent& /*event*/) {}
};

// One engine's reports, kept to reach their sink later and in an order the
// caller chooses: a fleet stepping instances on several threads runs each
// instance's steps on a worker and delivers what they reported in the order
// one thread would have (sim/fleet_windows.cpp). Whatever a report reads from
// a Sequence is read when it is made: the sequence may be gone at delivery.
// Only an engine's step reports (on_step, on_first_token, on_token, on_finish,
// on_cancel, on_kv_event, on_arrival) can be deferred.
class DeferredSink : public MetricsSink {
 public:
  // Reports kept so far, delivered or not: a mark for deliver().
  virtual size_t size() const = 0;
  // Delivers the kept reports before mark `upto` not yet delivered, in the order they were made.
  virtual void deliver(size_t upto) = 0;
  // Forgets every report (marks start again at 0).
  virtual void clear() = 0;
};

}  // namespace testbed
