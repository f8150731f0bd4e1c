// RunRecorder: the MetricsSink every run uses. Keeps one record per finished
// request and per step (nothing per token: inter-token gaps go to a histogram).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/metrics/log_histogram.h"
#include "engine/metrics_sink.h"

namespace testbed {

struct RequestRecord {
  // 8-byte fields first, then 4-byte ones, then flags: 128 bytes a request, no padding inside.
  int64_t id = 0;
  double arrival_s = 0, first_token_s = 0, finish_s = 0;
  // Wall-clock runs with the ingress cache: its measured embedding + lookup seconds (-1: not looked up).
  double ingress_s = -1;
  // Disaggregated runs: back-pressure wait (first token -> transfer start), transfer time and size
  // (prefill_instance below: -1, none; `instance` did it all).
  double handoff_wait_s = 0, transfer_s = 0;
  int64_t transfer_bytes = 0;
  int32_t instance = 0;
  int32_t prompt_tokens = 0, cached_tokens = 0, output_tokens = 0, preemptions = 0;
  int32_t restarts = 0;  // times it started over because its instance failed
  int32_t request_class = -1, routed_class = -1;  // model routing: its class, the class of the pool that served it
  // Answered by the ingress cache (instance -1): 1 exact, 2 semantic; false_hit: a semantic answer of another intent.
  int32_t answered_by = 0;
  int32_t prefill_instance = -1;
  int32_t transfer_blocks = 0, reused_blocks = 0;
  int32_t spec_drafted = 0, spec_accepted = 0, spec_steps = 0;  // speculative decoding: drafts verified / accepted, steps
  bool quality_failure = false;
  bool false_hit = false;
  double ttft_s() const { return first_token_s - arrival_s; }
  double e2e_s() const { return finish_s - arrival_s; }
  // Time per output token after the first; NaN for one-token outputs and cache answers.
  double tpot_s() const;
};
static_assert(sizeof(RequestRecord) == 128, "RequestRecord: a field added? keep it packed (README, Fleet scale)");

// A request that ended unfinished (cancelled by its client, or lost with a failed instance).
struct CancelRecord {
  int64_t id = 0;
  int32_t instance = 0;
  double arrival_s = 0, cancel_s = 0;
  double first_token_s = -1;  // -1: cancelled before its first token
  int32_t prompt_tokens = 0, output_tokens = 0;  // output_tokens: delivered before it ended (wasted work)
  CancelReason reason = CancelReason::Deadline;
};

class RunRecorder : public MetricsSink {
 public:
  explicit RunRecorder(bool keep_steps = true, bool keep_tokens = false, bool keep_events = false)
      : keep_steps_(keep_steps), keep_tokens_(keep_tokens), keep_events_(keep_events) {}

  // Room for `n` finished requests up front (a source's size_hint; at most
  // kMaxExpectedRequests), so the records are not copied as they grow, nor
  // held at up to twice their size. A hint only: more or fewer may finish.
  void expect_requests(int64_t n);
  static constexpr int64_t kMaxExpectedRequests = int64_t{1} << 24;  // 2 GiB of records

  void on_arrival(int instance, const Sequence& seq, double t) override;
  void on_step(const StepRecord& step) override;
  // (on_first_token is not overridden: a first token is in the finish record. Override it, and RecorderShard must keep it too.)
  void on_token(int instance, const Sequence& seq, double t, double gap_s) override;
  // Only a RunRecorder itself: a subclass may override on_token to watch tokens.
  bool takes_token_gaps_only() const override;
  void on_token_gaps(int instance, const double* gaps, size_t n) override;
  void on_finish(int instance, const Sequence& seq, double t) override;
  void on_cancel(int instance, const Sequence& seq, double t, CancelReason reason) override;
  void on_cache_answer(const Request& request, double t, bool semantic, bool correct) override;
  // Engines report a drain's events in one on_kv_events call, which counts
  // them without calling on_kv_event: a subclass that watches events
  // overrides on_kv_events (on_kv_event is final, so one that overrides it
  // does not compile instead of silently seeing nothing).
  void on_kv_event(int instance, const KvEvent& event) final;
  void on_kv_events(int instance, const KvEvent* events, size_t n) override;
  // Only a RunRecorder itself: a subclass may override on_kv_events to watch them.
  bool counts_kv_events_only() const override;
  void on_kv_counts(int instance, int64_t stored, int64_t removed) override;
  void on_sample(const InstanceSample& sample) override;
  void on_scale(const ScaleSample& sample) override { scale_.push_back(sample); }
  const std::vector<ScaleSample>& scale_samples() const { return scale_; }
  void on_request_event(const RequestEvent& event) override;
  // Keeps an engine's reports for later, in order (a fleet on several threads).
  std::unique_ptr<DeferredSink> make_deferred() override;
  // The wall-clock ingress's measured lookups (DriverStats::ingress_s), by
  // request id, after the run: each record's ingress_s, and the summary's
  // ingress_lookup_* over every lookup (cancelled requests' too).
  void set_ingress_seconds(const std::vector<std::pair<int64_t, double>>& by_id);
  const std::vector<double>& ingress_seconds() const { return ingress_s_; }

  int64_t num_arrived() const { return num_arrived_; }
  int64_t num_finished() const { return static_cast<int64_t>(requests_.size()); }
  int64_t num_cancelled() const { return static_cast<int64_t>(cancelled_.size()); }
  const std::vector<CancelRecord>& cancelled() const { return cancelled_; }
  const std::vector<RequestRecord>& requests() const { return requests_; }
  const std::vector<StepRecord>& steps() const { return steps_; }
  const LogHistogram& itl() const { return itl_; }
  int64_t num_steps() const { return num_steps_; }
  double busy_s() const { return busy_s_; }  // sum of step durations, all instances
  // Integrals over steps of duration x (KV slots allocated, KV tokens held, sequences in the step).
  double kv_slot_seconds() const { return kv_slot_s_; }
  double kv_token_seconds() const { return kv_token_s_; }
  double seq_seconds() const { return seq_s_; }
  // Sum of step durations per instance (index = instance id).
  const std::vector<double>& busy_by_instance() const { return busy_by_instance_; }
  // Per instance: integrals over its steps of duration x KV blocks used, and x sequences in the step.
  const std::vector<double>& kv_block_seconds_by_instance() const { return kv_block_s_by_instance_; }
  const std::vector<double>& seq_seconds_by_instance() const { return seq_s_by_instance_; }
  const std::vector<InstanceSample>& samples() const { return samples_; }
  // The requests' named events (keep_events only), in event-loop order.
  const std::vector<RequestEvent>& events() const { return events_; }
  bool any_handoff() const { return num_handoffs_ > 0; }
  // Speculative decoding over all steps (StepRecord's counts).
  int64_t spec_drafted() const { return spec_drafted_; }
  int64_t spec_accepted() const { return spec_accepted_; }
  int64_t decode_items() const { return decode_items_; }
  int64_t decode_appended() const { return decode_appended_; }
  int64_t num_blocks_stored() const { return num_blocks_stored_; }
  int64_t num_blocks_removed() const { return num_blocks_removed_; }
  // Output token ids of finished requests (keep_tokens only), in finish order.
  const std::vector<std::vector<int32_t>>& output_tokens() const { return tokens_; }
  const std::vector<int64_t>& output_token_ids() const { return token_owner_; }

 private:
  friend class RecorderShard;
  // What on_finish and on_cancel keep (a shard makes them at report time).
  static RequestRecord finish_record(int instance, const Sequence& seq, double t);
  static CancelRecord cancel_record(int instance, const Sequence& seq, double t, CancelReason reason);
  void add_finish(const RequestRecord& r);
  void add_kv_event(KvEvent::Kind kind);

  bool keep_steps_, keep_tokens_, keep_events_;
  int64_t num_handoffs_ = 0;
  int64_t spec_drafted_ = 0, spec_accepted_ = 0, decode_items_ = 0, decode_appended_ = 0;
  std::vector<RequestEvent> events_;
  std::vector<RequestRecord> requests_;
  std::vector<CancelRecord> cancelled_;
  std::vector<StepRecord> steps_;
  std::vector<InstanceSample> samples_;
  std::vector<ScaleSample> scale_;
  std::vector<double> busy_by_instance_, kv_block_s_by_instance_, seq_s_by_instance_;
  std::vector<std::vector<int32_t>> tokens_;
  std::vector<int64_t> token_owner_;
  std::vector<double> ingress_s_;
  LogHistogram itl_;
  int64_t num_arrived_ = 0, num_steps_ = 0, num_blocks_stored_ = 0, num_blocks_removed_ = 0;
  double kv_slot_s_ = 0.0, kv_token_s_ = 0.0, seq_s_ = 0.0;
  double busy_s_ = 0;
};

}  // namespace testbed
