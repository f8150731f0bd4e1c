// Engine = Scheduler + KvCacheManager + Executor: one serving instance, the same
// object whether a wall-clock driver or the discrete-event simulator runs it.
//
//   StepOutcome out = engine.step(now, clock);            // wall-clock drivers
//
//   StepPlan plan = engine.begin_step(now);               // the simulator: step begins
//   StepResult result = engine.executor().execute(plan.batch);
//   StepOutcome out = engine.end_step(plan, result, end); // ... and ends at an event
//
// end_step accepts or rolls back proposed tokens, appends tokens, commits the
// blocks of final tokens, finishes sequences, hands sequences off, and
// reports through the one MetricsSink: arrivals, tokens, finishes, the step,
// and the KV events the step's cache operations recorded.
//
// Hand-off (prefill/decode disaggregation): with hand_off_after_prefill, a
// sequence leaves after its first token with its KV export (StepOutcome::
// handed_off); its blocks stay here until release_export. The receiving
// engine reserves blocks with begin_import, the contents move between the
// executors (kv_transfer.h does it in one process), and end_import lets the
// sequence decode there.
#pragma once

#include <functional>
#include <map>
#include <memory>

#include "engine/executor.h"
#include "engine/frontend.h"
#include "engine/kv_cache_manager.h"
#include "engine/metrics_sink.h"
#include "engine/scheduler.h"
#include "engine/step.h"

namespace testbed {

class OptionTable;

struct EngineConfig {
  SchedulerConfig scheduler;
  CacheConfig cache;
  FrontendConfig frontend;  // when its tokens become visible to clients (engine/frontend.h)
  int max_model_len = 4096;
  bool hand_off_after_prefill = false;  // a prefill instance of a disaggregated deployment
  // A request that can never run here (longer than the model or the KV cache,
  // no output): error (a ConfigError naming the limit), reject (reported as
  // rejected, the run goes on, as a server answers 400), or truncate (the
  // prompt's head is cut to fit max_model_len, vLLM's truncate_prompt_tokens;
  // rejected if it still cannot run). From the workload (trace.on_invalid).
  std::string on_invalid = "error";
  std::string key_prefix;               // its keys' prefix in errors ("pool.NAME." for a pool's engines)
  // scheduler.*, cache.* and frontend.* (max_model_len is resolved from the model).
  void bind(OptionTable& table);
  void validate() const;
};

class Engine {
 public:
  // num_blocks: KV capacity, resolved by the caller (from config or memory).
  Engine(int instance, const EngineConfig& config, int num_blocks, std::unique_ptr<Executor> executor,
         MetricsSink* sink);

  int instance() const { return instance_; }
  // A request with restarts > 0 (started over after a failure) is not a new arrival to the sink.
  // False when it was rejected (EngineConfig::on_invalid): never queued, reported to the sink.
  bool add_request(Request request, double now);
  int64_t num_rejected() const { return num_rejected_; }

  // A whole step on a clock the driver reads when the executor returns.
  StepOutcome step(double now, const std::function<double()>& clock);
  // A whole step on a virtual clock: it ends now + the executor's duration.
  StepOutcome step(double now);
  StepPlan begin_step(double now);
  // The same into `plan`, reusing its buffers (the simulator's per-step path).
  void begin_step(double now, StepPlan& plan);
  StepOutcome end_step(const StepPlan& plan, const StepResult& result, double end_s);
  // The same into `out`, reusing its buffers (the simulator's per-step path).
  void end_step(const StepPlan& plan, const StepResult& result, double end_s, StepOutcome& out);

  // Receiving a handed-off sequence: reserves blocks for its KV (reusing
  // what this cache holds) and takes the sequence; false (h untouched) when
  // blocks or sequence slots are short, so the sender waits (back-pressure).
  bool begin_import(HandOff& h, KvImport& plan);
  // Its KV contents have arrived: it decodes here from the next step.
  void end_import(int64_t seq_id, double now);
  // The sender's side: a transfer ended, the exported blocks are free again.
  void release_export(int64_t seq_id) { kv_.release_export(seq_id); }

  // The instance failed: every unfinished sequence (running, waiting,
  // importing) leaves with its blocks freed, and the prefix cache is cleared
  // (listeners hear AllCleared). Throws std::logic_error while it exports KV.
  std::vector<std::unique_ptr<Sequence>> fail();
  // Forgets every cached prefix block (a replica switched off); listeners hear AllCleared.
  void clear_prefix_cache();
  // Loads the state a step reads first beyond this object itself (the
  // scheduler's lists, the KV cache's free list, the executor): a fleet calls
  // it for the instance whose event comes next (engine/common/load_ahead.h).
  // Changes nothing.
  void load_state() const {
    scheduler_.load_state();
    kv_.load_state();
    load_lines(executor_.get(), 1);  // its first line (its size is its type's)
  }
  bool has_unfinished() const { return scheduler_.has_unfinished() || !importing_.empty(); }
  // Sequences cancelled here because their clients left (engine/scheduler.h).
  int64_t num_cancelled() const { return scheduler_.num_cancelled(); }
  int num_importing() const { return static_cast<int>(importing_.size()); }
  Scheduler& scheduler() { return scheduler_; }
  const Scheduler& scheduler() const { return scheduler_; }
  KvCacheManager& kv_cache() { return kv_; }
  const KvCacheManager& kv_cache() const { return kv_; }
  Executor& executor() { return *executor_; }
  // Sequences holding blocks here (running, preempted ones still holding, importing).
  std::vector<const Sequence*> live_sequences() const;
  // Empty when the KV cache's invariants hold for the live sequences.
  std::string check_invariants() const { return kv_.check_invariants(live_sequences()); }

  // Hears every KV event of this engine (after the sink), e.g. a router's index.
  void add_kv_listener(KvEventListener* listener);
  MetricsSink* sink() const { return sink_; }
  // Reports go to `sink` from now on: a fleet stepping on several threads
  // lends each engine a DeferredSink for a window (sim/fleet_windows.cpp).
  // An engine made without a sink takes none (its KV cache records no events).
  void set_sink(MetricsSink* sink);

 private:
  void publish_kv_events();
  // What the KV cache records: events for listeners and for a sink that
  // watches them, only counts for a sink that counts them, nothing without either.
  void choose_kv_recording();
  // How the sink hears token gaps (one call a step, or one a token) and KV events: on construction and set_sink.
  void choose_sink_paths();

  int instance_;
  KvCacheManager kv_;
  MetricsSink* sink_;
  bool sink_takes_gaps_ = false;  // sink_->takes_token_gaps_only(), chosen with the sink
  std::vector<double> gaps_;      // a step's token gaps, for such a sink
  Scheduler scheduler_;
  std::unique_ptr<Executor> executor_;
  FrontendConfig frontend_;
  std::string on_invalid_;
  int64_t num_rejected_ = 0;
  std::vector<KvEventListener*> listeners_;
  std::map<int64_t, std::unique_ptr<Sequence>> importing_;
};

// The request `seq` came from, to be started again from its prompt elsewhere (restarts + 1).
Request restart_request(const Sequence& seq);

}  // namespace testbed
