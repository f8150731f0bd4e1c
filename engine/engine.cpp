#include "engine/engine.h"

#include <stdexcept>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void EngineConfig::bind(OptionTable& table) {
  scheduler.bind(table);
  cache.bind(table);
  frontend.bind(table);
}

void EngineConfig::validate() const {
  scheduler.validate();
  cache.validate();
  frontend.validate();
  require(max_model_len > 0, "model.max_model_len", "must be positive");
  require(on_invalid == "error" || on_invalid == "reject" || on_invalid == "truncate", "trace.on_invalid",
          "must be reject, error or truncate, got '" + on_invalid + "'");
}

Engine::Engine(int instance, const EngineConfig& config, int num_blocks, std::unique_ptr<Executor> executor,
               MetricsSink* sink)
    : instance_(instance),
      kv_(num_blocks, config.cache.block_size, config.cache.prefix_cache),
      sink_(sink),
      scheduler_(config.scheduler, kv_, config.max_model_len),
      executor_(std::move(executor)),
      frontend_(config.frontend),
      on_invalid_(config.on_invalid) {
  scheduler_.set_hand_off_after_prefill(config.hand_off_after_prefill);
  scheduler_.set_key_prefix(config.key_prefix);
  choose_sink_paths();
}

void Engine::choose_kv_recording() {
  using R = KvCacheManager::Recording;
  const R want = !listeners_.empty() ? R::Events
                 : !sink_            ? R::Off
                 : sink_->counts_kv_events_only() ? R::Counts
                                                  : R::Events;
  if (want == kv_.recording()) return;
  // Between steps every drain was published: nothing is lost by switching.
  if (kv_.num_stored_counted() || kv_.num_removed_counted() || !kv_.events().empty())
    throw std::logic_error("Engine: KV events recorded and not published");
  kv_.set_recording(want);
}

void Engine::choose_sink_paths() {
  sink_takes_gaps_ = sink_ && sink_->takes_token_gaps_only();
  choose_kv_recording();
}

void Engine::set_sink(MetricsSink* sink) {
  if ((sink == nullptr) != (sink_ == nullptr))
    throw std::logic_error("Engine::set_sink: an engine keeps having a sink, or keeps having none");
  sink_ = sink;
  choose_sink_paths();
}

void Engine::add_kv_listener(KvEventListener* listener) {
  listeners_.push_back(listener);
  choose_kv_recording();
}

bool Engine::add_request(Request request, double now) {
  auto seq = std::make_unique<Sequence>(std::move(request));
  std::string why = scheduler_.admission_error(*seq);
  if (!why.empty() && on_invalid_ == "truncate") {
    // Keep the prompt's tail: room for the output within the model's length.
    const int keep = scheduler_.max_model_len() - seq->max_output_tokens();
    if (keep >= 1 && seq->num_prompt_tokens() > keep) {
      Request cut = seq->request();
      cut.prompt.assign(seq->tokens().end() - keep, seq->tokens().end());
      cut.prompt_block_hashes.clear();
      cut.prompt_hash_block_size = 0;
      seq = std::make_unique<Sequence>(std::move(cut));
      why = scheduler_.admission_error(*seq);
    }
  }
  if (!why.empty()) {
    if (on_invalid_ == "error") throw ConfigError(why);
    if (sink_) {
      if (seq->request().restarts == 0) sink_->on_arrival(instance_, *seq, now);
      sink_->on_cancel(instance_, *seq, now, CancelReason::Rejected);
    }
    ++num_rejected_;
    return false;
  }
  // Hash the prompt's blocks on arrival, as vLLM's engine core does when it
  // adds a request, so scheduling steps only look them up.
  if (kv_.prefix_cache_enabled()) seq->block_hashes(kv_.block_size());
  if (sink_ && seq->request().restarts == 0) sink_->on_arrival(instance_, *seq, now);
  scheduler_.add(std::move(seq), now);
  return true;
}

StepOutcome Engine::step(double now, const std::function<double()>& clock) {
  const StepPlan plan = begin_step(now);
  const StepResult result = executor_->execute(plan.batch);
  return end_step(plan, result, clock());
}

StepOutcome Engine::step(double now) {
  const StepPlan plan = begin_step(now);
  const StepResult result = executor_->execute(plan.batch);
  return end_step(plan, result, now + result.duration_s);
}

StepPlan Engine::begin_step(double now) {
  StepPlan plan;
  begin_step(now, plan);
  return plan;
}

void Engine::begin_step(double now, StepPlan& plan) {
  plan.start_s = now;
  scheduler_.schedule(now, plan.batch);
  // Sequences whose clients left by now (all of cancelled() at this point).
  if (sink_)
    for (const auto& seq : scheduler_.cancelled()) sink_->on_cancel(instance_, *seq, now, CancelReason::Deadline);
  publish_kv_events();  // evictions made room for this batch, cancellations freed blocks
}

StepOutcome Engine::end_step(const StepPlan& plan, const StepResult& result, double end_s) {
  StepOutcome out;
  end_step(plan, result, end_s, out);
  return out;
}

void Engine::end_step(const StepPlan& plan, const StepResult& result, double end_s, StepOutcome& out) {
  out.start_s = plan.start_s;
  out.end_s = end_s;
  out.preempted = plan.batch.preempted;
  out.num_finished = 0;
  out.num_cancelled = 0;
  out.handed_off.clear();
  // Tokens reach clients when the front end has passed them on (engine/frontend.h).
  const double visible_s = frontend_.visible_s(plan.start_s, end_s);
  scheduler_.postprocess(plan.batch, result, visible_s, out);
  if (!sink_) {
    publish_kv_events();
    return;
  }
  // One pass over the outcomes: what the sink hears per sequence, and the step's counts.
  // (Counted in locals: the record's own fields were stored and reloaded around every sink call.)
  int draft_tokens = 0, accepted_tokens = 0, decode_items = 0, decode_appended = 0;
  // A sink that only takes token gaps hears them in one call (written through a local pointer, kept in a register).
  if (sink_takes_gaps_ && gaps_.size() < out.seqs.size()) gaps_.resize(out.seqs.size());
  double* const gaps = gaps_.data();
  size_t num_gaps = 0;
  const bool take_gaps = sink_takes_gaps_;
  for (const SeqOutcome& o : out.seqs) {
    if (o.num_appended > 0) {
      if (o.first_token) {
        sink_->on_first_token(instance_, *o.seq, visible_s);
      } else {
        const double gap = visible_s - o.previous_token_s;
        if (take_gaps)
          gaps[num_gaps++] = gap;
        else
          sink_->on_token(instance_, *o.seq, visible_s, gap);
        ++decode_items;
        decode_appended += o.num_appended;
      }
    }
    draft_tokens += o.num_draft;
    accepted_tokens += o.num_accepted;
    if (o.finished) sink_->on_finish(instance_, *o.seq, visible_s);
    if (o.cancelled) sink_->on_cancel(instance_, *o.seq, visible_s, CancelReason::Tokens);
  }
  if (num_gaps > 0) sink_->on_token_gaps(instance_, gaps, num_gaps);
  publish_kv_events();
  StepRecord rec;
  rec.draft_tokens = draft_tokens;
  rec.accepted_tokens = accepted_tokens;
  rec.decode_items = decode_items;
  rec.decode_appended = decode_appended;
  rec.instance = instance_;
  rec.start_s = plan.start_s;
  rec.duration_s = end_s - plan.start_s;
  rec.num_seqs = plan.batch.num_seqs();
  rec.prefill_tokens = plan.batch.num_prefill_tokens;
  rec.decode_tokens = plan.batch.num_decode_tokens;
  rec.kv_blocks_used = kv_.num_used_blocks();
  rec.kv_block_size = kv_.block_size();
  rec.kv_tokens = scheduler_.num_running_tokens_after_step();
  rec.num_preempted = static_cast<int>(plan.batch.preempted.size());
  rec.num_waiting = scheduler_.num_waiting();
  rec.num_running = scheduler_.num_running();
  sink_->on_step(rec);
}

bool Engine::begin_import(HandOff& h, KvImport& plan) {
  if (!h.seq) throw std::logic_error("Engine::begin_import: the hand-off holds no sequence");
  const int64_t id = h.seq->id();
  if (importing_.count(id)) throw std::logic_error("Engine::begin_import: sequence " + std::to_string(id) + " twice");
  scheduler_.check_admissible(*h.seq);
  if (scheduler_.num_running() + static_cast<int>(importing_.size()) >= scheduler_.config().max_num_seqs) return false;
  if (kv_.prefix_cache_enabled()) h.seq->block_hashes(kv_.block_size());
  if (!kv_.import_blocks(*h.seq, h.kv, plan)) return false;
  h.seq->status = SeqStatus::Importing;
  importing_[id] = std::move(h.seq);
  return true;
}

void Engine::end_import(int64_t seq_id, double /*now*/) {
  auto it = importing_.find(seq_id);
  if (it == importing_.end())
    throw std::logic_error("Engine::end_import: sequence " + std::to_string(seq_id) + " is not importing");
  std::unique_ptr<Sequence> seq = std::move(it->second);
  importing_.erase(it);
  kv_.commit_full_blocks(*seq);  // its blocks hold final tokens now
  publish_kv_events();
  scheduler_.add_running(std::move(seq));
}

std::vector<std::unique_ptr<Sequence>> Engine::fail() {
  if (kv_.num_exports() > 0)
    throw std::logic_error("Engine::fail: instance " + std::to_string(instance_) + " fails while exporting KV");
  std::vector<std::unique_ptr<Sequence>> out = scheduler_.take_all();
  for (auto& [id, seq] : importing_) {
    kv_.free(*seq);
    out.push_back(std::move(seq));
  }
  importing_.clear();
  kv_.clear_cache();
  publish_kv_events();
  return out;
}

void Engine::clear_prefix_cache() {
  kv_.clear_cache();
  publish_kv_events();
}

Request restart_request(const Sequence& seq) {
  Request r = seq.request();
  r.prompt.assign(seq.tokens().begin(), seq.tokens().begin() + seq.num_prompt_tokens());
  r.prompt_block_hashes.clear();
  r.prompt_hash_block_size = 0;
  ++r.restarts;
  return r;
}

std::vector<const Sequence*> Engine::live_sequences() const {
  std::vector<const Sequence*> out = scheduler_.live_sequences();
  for (const auto& [id, seq] : importing_) out.push_back(seq.get());
  return out;
}

void Engine::publish_kv_events() {
  if (kv_.counting_events()) {  // only a counting sink hears them (choose_kv_recording)
    if (kv_.num_stored_counted() == 0 && kv_.num_removed_counted() == 0) return;
    sink_->on_kv_counts(instance_, kv_.num_stored_counted(), kv_.num_removed_counted());
    kv_.clear_counts();
    return;
  }
  if (kv_.events().empty()) return;
  const std::vector<KvEvent>& events = kv_.events();
  if (sink_) sink_->on_kv_events(instance_, events.data(), events.size());
  for (KvEventListener* l : listeners_) l->on_kv_events(events.data(), events.size());
  kv_.clear_events();
}

}  // namespace testbed
