#include "engine/metrics/run_recorder.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <utility>

namespace testbed {

const char* request_event_name(RequestEvent::Kind kind) {
  switch (kind) {
    case RequestEvent::Kind::Arrival: return "arrival";
    case RequestEvent::Kind::Route: return "route";
    case RequestEvent::Kind::FirstToken: return "first_token";
    case RequestEvent::Kind::PrefillDone: return "prefill_done";
    case RequestEvent::Kind::DecodeRoute: return "decode_route";
    case RequestEvent::Kind::TransferStart: return "transfer_start";
    case RequestEvent::Kind::TransferDone: return "transfer_done";
    case RequestEvent::Kind::Finish: return "finish";
    case RequestEvent::Kind::Cancel: return "cancel";
    case RequestEvent::Kind::Fail: return "fail";
    case RequestEvent::Kind::ReplicaStart: return "replica_start";
    case RequestEvent::Kind::ReplicaReady: return "replica_ready";
    case RequestEvent::Kind::ReplicaDrain: return "replica_drain";
    case RequestEvent::Kind::ReplicaOff: return "replica_off";
    case RequestEvent::Kind::CacheAnswer: return "cache_answer";
  }
  return "?";
}

const char* cancel_reason_name(CancelReason reason) {
  switch (reason) {
    case CancelReason::Deadline: return "deadline";
    case CancelReason::Tokens: return "tokens";
    case CancelReason::Lost: return "lost";
    case CancelReason::Rejected: return "rejected";
  }
  return "?";
}

double RequestRecord::tpot_s() const {
  return output_tokens > 1 && answered_by == 0 ? (finish_s - first_token_s) / (output_tokens - 1) : NAN;
}

void RunRecorder::on_arrival(int, const Sequence&, double) {
  ++num_arrived_;
}

void RunRecorder::on_step(const StepRecord& step) {
  ++num_steps_;
  spec_drafted_ += step.draft_tokens;
  spec_accepted_ += step.accepted_tokens;
  decode_items_ += step.decode_items;
  decode_appended_ += step.decode_appended;
  busy_s_ += step.duration_s;
  kv_slot_s_ += static_cast<double>(step.kv_blocks_used) * step.kv_block_size * step.duration_s;
  kv_token_s_ += static_cast<double>(step.kv_tokens) * step.duration_s;
  seq_s_ += step.num_seqs * step.duration_s;
  if (static_cast<size_t>(step.instance) >= busy_by_instance_.size()) {
    busy_by_instance_.resize(step.instance + 1, 0.0);
    kv_block_s_by_instance_.resize(step.instance + 1, 0.0);
    seq_s_by_instance_.resize(step.instance + 1, 0.0);
  }
  busy_by_instance_[step.instance] += step.duration_s;
  kv_block_s_by_instance_[step.instance] += step.kv_blocks_used * step.duration_s;
  seq_s_by_instance_[step.instance] += step.num_seqs * step.duration_s;
  if (keep_steps_) steps_.push_back(step);
}

void RunRecorder::on_token(int, const Sequence&, double, double gap_s) {
  itl_.add(gap_s);
}

bool RunRecorder::takes_token_gaps_only() const { return typeid(*this) == typeid(RunRecorder); }

void RunRecorder::on_token_gaps(int, const double* gaps, size_t n) {
  for (size_t i = 0; i < n; ++i) itl_.add(gaps[i]);
}

RequestRecord RunRecorder::finish_record(int instance, const Sequence& seq, double t) {
  RequestRecord r;
  r.id = seq.id();
  r.instance = instance;
  r.arrival_s = seq.client_arrival_s();
  r.first_token_s = seq.first_token_s;
  r.finish_s = t;
  r.prompt_tokens = seq.num_prompt_tokens();
  r.cached_tokens = seq.num_cached_tokens < 0 ? 0 : seq.num_cached_tokens;
  r.output_tokens = seq.num_output_tokens();
  r.preemptions = seq.num_preemptions;
  r.restarts = seq.request().restarts;
  r.request_class = seq.request().request_class;
  r.routed_class = seq.request().routed_class;
  r.quality_failure = seq.request().quality_failure;
  r.spec_drafted = seq.spec_drafted;
  r.spec_accepted = seq.spec_accepted;
  r.spec_steps = seq.spec_steps;
  const Sequence::HandOffLog& h = seq.handoff;
  if (h.prefill_instance >= 0) {
    r.prefill_instance = h.prefill_instance;
    r.handoff_wait_s = h.transfer_start_s - h.ready_s;
    r.transfer_s = h.transfer_end_s - h.transfer_start_s;
    r.transfer_bytes = h.transfer_bytes;
    r.transfer_blocks = h.transfer_blocks;
    r.reused_blocks = h.reused_blocks;
  }
  return r;
}

void RunRecorder::expect_requests(int64_t n) {
  if (n > 0) requests_.reserve(static_cast<size_t>(std::min(n, kMaxExpectedRequests)));  // beyond: growth decides
}

void RunRecorder::add_finish(const RequestRecord& r) {
  if (r.prefill_instance >= 0) ++num_handoffs_;
  requests_.push_back(r);
}

void RunRecorder::on_finish(int instance, const Sequence& seq, double t) {
  add_finish(finish_record(instance, seq, t));
  if (keep_tokens_) {
    tokens_.emplace_back(seq.tokens().begin() + seq.num_prompt_tokens(), seq.tokens().end());
    token_owner_.push_back(seq.id());
  }
}

CancelRecord RunRecorder::cancel_record(int instance, const Sequence& seq, double t, CancelReason reason) {
  CancelRecord r;
  r.id = seq.id();
  r.instance = instance;
  r.arrival_s = seq.client_arrival_s();
  r.cancel_s = t;
  r.first_token_s = seq.num_output_tokens() > 0 ? seq.first_token_s : -1.0;
  r.prompt_tokens = seq.num_prompt_tokens();
  r.output_tokens = seq.num_output_tokens();
  r.reason = reason;
  return r;
}

void RunRecorder::on_cancel(int instance, const Sequence& seq, double t, CancelReason reason) {
  cancelled_.push_back(cancel_record(instance, seq, t, reason));
}

void RunRecorder::on_cache_answer(const Request& q, double t, bool semantic, bool correct) {
  ++num_arrived_;
  RequestRecord r;
  r.id = q.id;
  r.instance = -1;
  r.arrival_s = q.arrival_s - q.frontend_s;
  r.first_token_s = t;
  r.finish_s = t;
  r.prompt_tokens = static_cast<int32_t>(q.prompt.size());
  r.output_tokens = q.max_output_tokens;  // the cached answer, delivered at once
  r.request_class = q.request_class;
  r.answered_by = semantic ? 2 : 1;
  r.false_hit = semantic && !correct;
  requests_.push_back(r);
}

void RunRecorder::set_ingress_seconds(const std::vector<std::pair<int64_t, double>>& by_id) {
  std::unordered_map<int64_t, double> seconds;
  ingress_s_.clear();
  for (const auto& [id, s] : by_id) {
    seconds[id] = s;
    ingress_s_.push_back(s);
  }
  for (RequestRecord& r : requests_) {
    const auto it = seconds.find(r.id);
    if (it != seconds.end()) r.ingress_s = it->second;
  }
}

void RunRecorder::on_kv_event(int, const KvEvent& event) { add_kv_event(event.kind); }

void RunRecorder::on_kv_events(int, const KvEvent* events, size_t n) {
  // Counted in locals (two events per block of a prompt).
  int64_t stored = 0, removed = 0;
  for (size_t i = 0; i < n; ++i) {
    stored += events[i].kind == KvEvent::Kind::BlockStored;
    removed += events[i].kind == KvEvent::Kind::BlockRemoved;
  }
  num_blocks_stored_ += stored;
  num_blocks_removed_ += removed;
}

bool RunRecorder::counts_kv_events_only() const { return typeid(*this) == typeid(RunRecorder); }

void RunRecorder::on_kv_counts(int, int64_t stored, int64_t removed) {
  num_blocks_stored_ += stored;
  num_blocks_removed_ += removed;
}

void RunRecorder::add_kv_event(KvEvent::Kind kind) {
  if (kind == KvEvent::Kind::BlockStored) ++num_blocks_stored_;
  if (kind == KvEvent::Kind::BlockRemoved) ++num_blocks_removed_;
}

void RunRecorder::on_sample(const InstanceSample& sample) { samples_.push_back(sample); }

void RunRecorder::on_request_event(const RequestEvent& event) {
  if (keep_events_) events_.push_back(event);
}

// An engine's reports as RunRecorder would take them, kept in order: each kind
// in its own array, and the order of kinds apart, so a decode step's reports
// cost a byte and a double each.
class RecorderShard final : public DeferredSink {
 public:
  explicit RecorderShard(RunRecorder& to) : to_(to) {}

  void on_arrival(int, const Sequence&, double) override { ops_.push_back(Op::Arrival); }
  void on_step(const StepRecord& step) override {
    ops_.push_back(Op::Step);
    steps_.push_back(step);
  }
  // deliver() adds the gaps to the recorder's histogram, never calling its on_token.
  bool takes_token_gaps_only() const override { return true; }
  void on_token(int instance, const Sequence&, double, double gap_s) override { on_token_gaps(instance, &gap_s, 1); }
  void on_token_gaps(int, const double* gaps, size_t n) override {
    ops_.push_back(Op::Tokens);
    gap_counts_.push_back(n);
    gaps_.insert(gaps_.end(), gaps, gaps + n);
  }
  void on_finish(int instance, const Sequence& seq, double t) override {
    ops_.push_back(Op::Finish);
    finishes_.push_back(RunRecorder::finish_record(instance, seq, t));
    if (to_.keep_tokens_) tokens_.emplace_back(seq.tokens().begin() + seq.num_prompt_tokens(), seq.tokens().end());
  }
  void on_cancel(int instance, const Sequence& seq, double t, CancelReason reason) override {
    ops_.push_back(Op::Cancel);
    cancels_.push_back(RunRecorder::cancel_record(instance, seq, t, reason));
  }
  void on_kv_event(int, const KvEvent& event) override {
    if (event.kind == KvEvent::Kind::BlockStored) ops_.push_back(Op::KvStored);
    if (event.kind == KvEvent::Kind::BlockRemoved) ops_.push_back(Op::KvRemoved);
  }
  // The recorder only counts them, whatever its class: deliver() never called its on_kv_events.
  bool counts_kv_events_only() const override { return true; }
  void on_kv_counts(int, int64_t stored, int64_t removed) override {
    ops_.push_back(Op::KvCounts);
    kv_counts_.emplace_back(stored, removed);
  }
  // Not an engine's step reports: a fleet makes these itself, in order.
  void on_cache_answer(const Request&, double, bool, bool) override { refuse("on_cache_answer"); }
  void on_sample(const InstanceSample&) override { refuse("on_sample"); }
  void on_scale(const ScaleSample&) override { refuse("on_scale"); }
  void on_request_event(const RequestEvent&) override { refuse("on_request_event"); }

  size_t size() const override { return ops_.size(); }
  void deliver(size_t upto) override {
    if (upto > ops_.size() || upto < next_) throw std::logic_error("RecorderShard::deliver: mark out of range");
    for (; next_ < upto; ++next_) switch (ops_[next_]) {
        case Op::Arrival: ++to_.num_arrived_; break;
        case Op::Step: to_.on_step(steps_[step_++]); break;
        case Op::Tokens:
          for (const size_t end = gap_ + gap_counts_[gap_count_++]; gap_ < end; ++gap_) to_.itl_.add(gaps_[gap_]);
          break;
        case Op::Finish: {
          const RequestRecord& r = finishes_[finish_++];
          to_.add_finish(r);
          if (to_.keep_tokens_) {
            to_.tokens_.push_back(std::move(tokens_[token_++]));
            to_.token_owner_.push_back(r.id);
          }
          break;
        }
        case Op::Cancel: to_.cancelled_.push_back(cancels_[cancel_++]); break;
        case Op::KvStored: to_.add_kv_event(KvEvent::Kind::BlockStored); break;
        case Op::KvRemoved: to_.add_kv_event(KvEvent::Kind::BlockRemoved); break;
        case Op::KvCounts: {
          const auto [stored, removed] = kv_counts_[kv_count_++];
          to_.num_blocks_stored_ += stored;
          to_.num_blocks_removed_ += removed;
          break;
        }
      }
  }
  void clear() override {
    ops_.clear();
    steps_.clear();
    gaps_.clear();
    gap_counts_.clear();
    finishes_.clear();
    cancels_.clear();
    tokens_.clear();
    kv_counts_.clear();
    next_ = step_ = gap_ = gap_count_ = finish_ = cancel_ = token_ = kv_count_ = 0;
  }

 private:
  enum class Op : uint8_t { Arrival, Step, Tokens, Finish, Cancel, KvStored, KvRemoved, KvCounts };
  [[noreturn]] static void refuse(const char* what) {
    throw std::logic_error(std::string("RecorderShard: ") + what + " is not an engine's step report");
  }
  RunRecorder& to_;
  std::vector<Op> ops_;
  std::vector<StepRecord> steps_;
  std::vector<double> gaps_;
  std::vector<size_t> gap_counts_;  // a Tokens op's gaps
  std::vector<RequestRecord> finishes_;
  std::vector<CancelRecord> cancels_;
  std::vector<std::vector<int32_t>> tokens_;
  std::vector<std::pair<int64_t, int64_t>> kv_counts_;  // (stored, removed) a drain
  size_t next_ = 0, step_ = 0, gap_ = 0, gap_count_ = 0, finish_ = 0, cancel_ = 0, token_ = 0, kv_count_ = 0;
};

std::unique_ptr<DeferredSink> RunRecorder::make_deferred() { return std::make_unique<RecorderShard>(*this); }

}  // namespace testbed
