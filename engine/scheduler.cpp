#include "engine/scheduler.h"

#include <algorithm>
#include <stdexcept>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void SchedulerConfig::bind(OptionTable& t) {
  t.add("scheduler.max_num_seqs", &max_num_seqs, "most sequences running at once");
  t.add("scheduler.max_batch_tokens", &max_batch_tokens, "token budget of one step");
  t.add("scheduler.chunked_prefill", &chunked_prefill, "split long prompts across steps");
  t.add("scheduler.chunk_size", &chunk_size, "most prompt tokens one sequence gets per step");
  policy.bind(t);
  t.add("scheduler.admission_watermark", &admission_watermark,
        "share of KV blocks admission leaves free for running sequences to grow (vLLM: 0.01)");
  t.add("scheduler.kv_reservation", &kv_reservation,
        "KV reserved at admission: paged (none) | max_length | pow2 | oracle (prompt + output), as before paging");
}

void SchedulerConfig::validate() const {
  require(max_num_seqs > 0, "scheduler.max_num_seqs", "must be positive");
  require(max_batch_tokens > 0, "scheduler.max_batch_tokens", "must be positive");
  require(chunk_size > 0, "scheduler.chunk_size", "must be positive");
  require(admission_watermark >= 0 && admission_watermark < 1, "scheduler.admission_watermark", "must be in [0, 1)");
  require(kv_reservation == "paged" || kv_reservation == "max_length" || kv_reservation == "pow2" ||
              kv_reservation == "oracle",
          "scheduler.kv_reservation", "must be paged, max_length, pow2 or oracle, got '" + kv_reservation + "'");
  policy.validate();
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv, int max_model_len)
    : config_(config), kv_(kv), max_model_len_(max_model_len) {
  config_.validate();
  policy_ = config_.policy.create();
  watermark_blocks_ = static_cast<int>(config_.admission_watermark * kv_.num_blocks());
}

void Scheduler::add(std::unique_ptr<Sequence> seq, double now) {
  check_admissible(*seq);
  seq->status = SeqStatus::Waiting;
  watch_deadline(*seq);
  insert_waiting(std::move(seq), now);
}

void Scheduler::add_running(std::unique_ptr<Sequence> seq) {
  seq->status = SeqStatus::Running;
  watch_deadline(*seq);
  insert_running(std::move(seq));
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_all() {
  std::vector<std::unique_ptr<Sequence>> out;
  for (auto& s : running_) out.push_back(std::move(s));
  for (auto& s : waiting_) out.push_back(std::move(s));
  running_.clear();
  waiting_.clear();
  for (auto& s : out) kv_.free(*s);
  deadlines_ = {};
  return out;
}

void Scheduler::watch_deadline(const Sequence& seq) {
  if (seq.request().cancel_after_s >= 0) deadlines_.emplace(seq.cancel_deadline_s(), seq.id());
}

void Scheduler::cancel(Sequence& seq, double now) {
  kv_.free(seq);
  seq.truncate_draft_tokens(0);
  seq.status = SeqStatus::Cancelled;
  seq.finish_s = now;
  ++num_cancelled_;
}

void Scheduler::cancel_due(double now) {
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    const int64_t id = deadlines_.top().second;
    deadlines_.pop();
    // Linear searches, once per cancelled sequence; a sequence that already
    // finished or left is in neither queue, and its entry just goes.
    auto r = std::find_if(running_.begin(), running_.end(), [id](const auto& s) { return s->id() == id; });
    if (r != running_.end()) {
      cancel(**r, now);
      cancelled_.push_back(std::move(*r));
      running_.erase(r);
      continue;
    }
    auto w = std::find_if(waiting_.begin(), waiting_.end(), [id](const auto& s) { return s->id() == id; });
    if (w != waiting_.end()) {
      cancel(**w, now);
      cancelled_.push_back(std::move(*w));
      waiting_.erase(w);
    }
  }
}

int Scheduler::reservation_tokens(const Sequence& seq) const {
  const int total = seq.num_prompt_tokens() + seq.max_output_tokens();
  const std::string& mode = config_.kv_reservation;
  if (mode == "max_length") return max_model_len_;
  if (mode == "oracle") return total;
  if (mode == "pow2") {
    int64_t p = 1;
    while (p < total) p *= 2;
    return static_cast<int>(std::min<int64_t>(p, max_model_len_));
  }
  return 0;
}

int64_t Scheduler::num_running_tokens() const {
  int64_t n = 0;
  for (const auto& s : running_) n += s->num_computed_tokens;
  return n;
}

void Scheduler::check_admissible(const Sequence& seq) const {
  const std::string why = admission_error(seq);
  if (!why.empty()) throw ConfigError(why);
}

std::string Scheduler::admission_error(const Sequence& seq) const {
  const int total = seq.num_prompt_tokens() + seq.max_output_tokens();
  const int blocks = kv_.blocks_needed(std::max(total, reservation_tokens(seq)));
  const char* key = nullptr;
  std::string why;
  if (seq.num_prompt_tokens() <= 0) {
    key = "trace";
    why = "has an empty prompt";
  } else if (seq.max_output_tokens() <= 0) {
    key = "trace";
    why = "asks for no output token";
  } else if (total > max_model_len_) {
    key = "model.max_model_len";
    why = "is longer than the model's " + std::to_string(max_model_len_) + " tokens";
  } else if (blocks > kv_.num_blocks()) {
    key = "cache.num_blocks";
    why = "needs " + std::to_string(blocks) + " blocks; the cache has " + std::to_string(kv_.num_blocks());
  } else if (!config_.chunked_prefill && total > config_.max_batch_tokens) {
    // Without chunking a step must hold a whole (re)computed sequence.
    key = "scheduler.max_batch_tokens";
    why = "does not fit one step of " + std::to_string(config_.max_batch_tokens) + " tokens with chunked_prefill off";
  }
  if (!key) return "";
  return (key[0] == 'c' || key[0] == 's' ? key_prefix_ : std::string()) + key + ": request " + std::to_string(seq.id()) +
         " (" + std::to_string(seq.num_prompt_tokens()) + " prompt + " + std::to_string(seq.max_output_tokens()) +
         " output tokens) " + why;
}

int Scheduler::chunk_limit(int remaining, int budget) const {
  int n = remaining;
  if (config_.chunked_prefill) n = std::min(n, config_.chunk_size);
  n = std::min(n, budget);
  // Without chunking a prompt is computed whole or not at all this step.
  if (!config_.chunked_prefill && n < remaining) return 0;
  return n;
}

void Scheduler::schedule(double now, Batch& batch) {
  finished_.clear();
  cancelled_.clear();
  cancel_due(now);
  policy_->order_waiting(waiting_, now);
  batch.items.clear();
  batch.preempted.clear();
  batch.num_prefill_tokens = batch.num_decode_tokens = 0;
  batch.want_probs = false;
  batch.items.reserve(running_.size() + 8);
  int budget = config_.max_batch_tokens;
  scheduled_.assign(running_.size(), Mark::No);
  // Returns how many running sequences are not decoding; the second pass only runs for them.
  if (schedule_running(batch, budget, /*decode_pass=*/true, now) > 0)
    schedule_running(batch, budget, /*decode_pass=*/false, now);
  if (batch.preempted.empty()) admit_waiting(batch, budget, now);
  for (const ScheduledSeq& item : batch.items)
    (item.is_decode() ? batch.num_decode_tokens : batch.num_prefill_tokens) += item.num_new;
}

int Scheduler::schedule_running(Batch& batch, int& budget, bool decode_pass, double now) {
  int num_other = 0;
  // Running sequence i (which a preemption may move: i follows it).
  auto visit = [&](size_t& i) __attribute__((always_inline)) {
    if (scheduled_[i] == Mark::Yes) return;
    Sequence& seq = *running_[i];
    if (decode_pass != seq.is_decoding()) {
      ++num_other;
      return;
    }
    int n = 1, drafts = 0;
    if (decode_pass) {
      // Proposed tokens ride along while the budget and the output length allow.
      if (seq.num_draft_tokens() > 0)
        drafts = std::max(0, std::min({seq.num_draft_tokens(), budget - 1,
                                       seq.max_output_tokens() - seq.num_output_tokens() - 1}));
    } else {
      n = chunk_limit(seq.num_tokens() - seq.num_computed_tokens, budget);
      if (n == 0) return;
    }
    bool self_preempted = false;
    while (!kv_.allocate(seq, n, drafts)) {
      if (drafts > 0) {  // proposed tokens never cost a preemption
        drafts = 0;
        continue;
      }
      const size_t victim = policy_->choose_victim(running_, now);
      self_preempted = running_[victim].get() == &seq;
      preempt(victim, batch, budget, now);
      if (self_preempted) break;
      if (victim < i) --i;  // seq moved down one place
    }
    if (self_preempted) {
      --i;  // the next sequence moved into this place
      return;
    }
    if (drafts < seq.num_draft_tokens()) seq.truncate_draft_tokens(drafts);
    batch.items.emplace_back(&seq, seq.num_computed_tokens, n + drafts, drafts);
    scheduled_[i] = Mark::Yes;
    budget -= n + drafts;
  };
  // The decode pass of a fleet's instance loads sequences a few ahead; a
  // lone instance's loop goes without the check (0.6% of the Azure trace's
  // instructions, cachegrind).
  constexpr size_t kAhead = 6;
  if (decode_pass && load_ahead_) {
    for (size_t i = 0; i < std::min(kAhead, running_.size()); ++i) prefetch_sequence(running_[i].get());
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      if (i + kAhead < running_.size()) prefetch_sequence(running_[i + kAhead].get());
      visit(i);
    }
  } else {
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) visit(i);
  }
  return num_other;
}

void Scheduler::preempt(size_t v, Batch& batch, int& budget, double now) {
  std::unique_ptr<Sequence> victim = std::move(running_[v]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(v));
  const bool was_scheduled = scheduled_[v] == Mark::Yes;
  scheduled_.erase(scheduled_.begin() + static_cast<std::ptrdiff_t>(v));
  if (was_scheduled) {
    auto it = std::find_if(batch.items.begin(), batch.items.end(),
                           [&](const ScheduledSeq& s) { return s.seq == victim.get(); });
    budget += it->num_new;
    batch.items.erase(it);
  }
  kv_.free(*victim);
  victim->num_computed_tokens = 0;
  victim->truncate_draft_tokens(0);
  ++victim->num_preemptions;
  ++num_preemptions_;
  victim->status = SeqStatus::Waiting;
  batch.preempted.push_back(victim->id());
  insert_waiting(std::move(victim), now);
}

void Scheduler::admit_waiting(Batch& batch, int& budget, double /*now*/) {
  if (waiting_.empty() || num_running() >= config_.max_num_seqs) return;
  SchedulerView view;
  view.num_waiting = num_waiting();
  view.num_running = num_running();
  for (const auto& s : running_)
    if (s->num_computed_tokens >= s->num_prompt_tokens()) ++view.num_running_decoding;

  while (!waiting_.empty() && budget > 0 && num_running() < config_.max_num_seqs && policy_->may_admit(view)) {
    Sequence& seq = *waiting_.front();
    PrefixHit& hit = hit_;  // its array reused: no allocation per admission
    kv_.find_cached_prefix(seq, hit);
    const int n = chunk_limit(seq.num_tokens() - hit.num_tokens(), budget);
    if (n == 0) break;
    // The watermark: admission leaves watermark_blocks free (the running ones' room to grow).
    if (watermark_blocks_ > 0 &&
        kv_.num_blocks() - kv_.num_used_blocks() - kv_.blocks_needed(seq.num_tokens() - hit.num_tokens()) <
            watermark_blocks_)
      break;
    if (!kv_.allocate(seq, n, hit)) break;
    // Reservation (scheduler.kv_reservation): the rest of its reserved length now, or wait.
    const int reserve = reservation_tokens(seq) - (seq.num_computed_tokens + n);
    if (reserve > 0 && !kv_.allocate(seq, n, reserve)) {
      kv_.free(seq);
      seq.num_computed_tokens = 0;
      break;
    }
    if (seq.num_cached_tokens < 0) seq.num_cached_tokens = hit.num_tokens();
    seq.status = SeqStatus::Running;
    batch.items.emplace_back(&seq, seq.num_computed_tokens, n);
    budget -= n;
    std::unique_ptr<Sequence> owned = std::move(waiting_.front());
    waiting_.pop_front();
    insert_running(std::move(owned));
    ++view.num_running;
    --view.num_waiting;
  }
}

void Scheduler::insert_waiting(std::unique_ptr<Sequence> seq, double now) {
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                              [&](const auto& a, const auto& b) { return policy_->before(*a, *b, now); });
  waiting_.insert(pos, std::move(seq));
}

void Scheduler::insert_running(std::unique_ptr<Sequence> seq) {
  auto pos = std::upper_bound(running_.begin(), running_.end(), seq,
                              [](const auto& a, const auto& b) { return arrives_before(*a, *b); });
  const size_t index = pos - running_.begin();
  running_.insert(pos, std::move(seq));
  // During schedule() the flags follow running_ (outside it they are stale and unread).
  if (index <= scheduled_.size()) scheduled_.insert(scheduled_.begin() + static_cast<std::ptrdiff_t>(index), Mark::Yes);
}

namespace {

[[noreturn]] void contract_error(const Sequence& seq, const std::string& what) {
  throw std::logic_error("executor: sequence " + std::to_string(seq.id()) + ": " + what);
}

}  // namespace

void Scheduler::accept_drafts(const ScheduledSeq& item, const int32_t* tokens, int n) {
  Sequence& seq = *item.seq;
  if (n < 1 || n > item.num_draft + 1)
    contract_error(seq, std::to_string(n) + " tokens returned for " + std::to_string(item.num_draft + 1) +
                            " verified positions");
  const int accepted = n - 1;
  for (int i = 0; i < accepted; ++i)
    if (tokens[i] != seq.draft_tokens()[i]) contract_error(seq, "an accepted token is not the proposed one");
  seq.truncate_draft_tokens(0);
  seq.num_computed_tokens += item.num_new - (item.num_draft - accepted);
  if (accepted < item.num_draft) kv_.truncate(seq, seq.num_computed_tokens);
}

void Scheduler::postprocess(const Batch& batch, const StepResult& result, double visible_s, StepOutcome& out) {
  const double now = visible_s;  // delivery times only
  const size_t num_items = batch.items.size();
  if (result.num_items() != static_cast<int>(num_items))
    throw std::logic_error("executor: returned results for " + std::to_string(result.num_items()) + " items of a " +
                           std::to_string(num_items) + "-item batch");
  // Raw pointers: the stores into sequences below must not make the compiler
  // reload every vector's data pointer (this loop runs for every running sequence).
  const ScheduledSeq* items = batch.items.data();
  const int32_t* offsets = result.token_offsets.data();
  const int32_t* all_tokens = result.tokens.data();
  const bool any_drafts = !result.draft_offsets.empty();
  if (any_drafts && result.draft_offsets.size() != num_items + 1)
    throw std::logic_error("executor: proposals for " + std::to_string(result.draft_offsets.size() - 1) +
                           " items of a " + std::to_string(num_items) + "-item batch");
  out.seqs.resize(num_items);
  SeqOutcome* outs = out.seqs.data();
  bool any_left = false;
  // The computed tokens of the items that stay running.
  int64_t kept_tokens = 0;
  // In a fleet, other instances' steps ran since this batch was scheduled, so
  // its sequences are out of the cache: load each a few items ahead, and the
  // end of its token vector (where this step's token goes) once it is there.
  // A sequence whose step fills a block commits it: where its hash is kept
  // is loaded with the token's place, then its cache-table slot (kNear ahead).
  constexpr size_t kAhead = 12, kNear = 3;
  // One item's post-processing; the loads ahead run in a loop of their own
  // (a lone instance's checks for them were 1.4% of the Azure trace's
  // instructions, cachegrind).
  auto process = [&](size_t k) __attribute__((always_inline)) {
    const ScheduledSeq& item = items[k];
    Sequence& seq = *item.seq;
    SeqOutcome& o = outs[k];  // filled in place: building one aside and copying it cost more than the rest
    o = SeqOutcome();
    o.seq = &seq;
    const int n = offsets[k + 1] - offsets[k];
    if (!item.samples()) {
      if (n != 0) contract_error(seq, "tokens returned for an item that does not sample");
      seq.num_computed_tokens += item.num_new;
      kv_.commit_full_blocks(seq);
      kept_tokens += seq.num_computed_tokens;
      return;
    }
    const int32_t* tokens = all_tokens + offsets[k];
    if (item.num_draft == 0) {
      if (n != 1) contract_error(seq, std::to_string(n) + " tokens returned for one sampled position");
      seq.num_computed_tokens += item.num_new;
    } else {
      // Rejected positions roll back before any block is committed, so the
      // prefix cache only ever holds final tokens.
      accept_drafts(item, tokens, n);
      o.num_draft = item.num_draft;
      o.num_accepted = n - 1;
      seq.spec_drafted += o.num_draft;
      seq.spec_accepted += o.num_accepted;
      ++seq.spec_steps;
    }
    for (int i = 0; i < n; ++i) {
      if (tokens[i] < 0) contract_error(seq, "returned a negative token id");
      seq.append_token(tokens[i]);
    }
    kv_.commit_full_blocks(seq);
    o.num_appended = n;
    o.first_token = seq.num_output_tokens() == n;
    // One delivery per step: a verified run of proposed tokens reaches the client at once.
    o.previous_token_s = seq.last_token_s;
    if (o.first_token) seq.first_token_s = now;
    seq.last_token_s = now;
    if (seq.num_output_tokens() >= seq.max_output_tokens() || seq.num_tokens() >= max_model_len_) {
      kv_.free(seq);
      seq.status = SeqStatus::Finished;
      seq.finish_s = now;
      o.finished = true;
      ++out.num_finished;
      any_left = true;
    } else if (seq.cancel_after_tokens() > 0 && seq.num_output_tokens() >= seq.cancel_after_tokens()) {
      // The client read its tokens and left: nothing more is computed for it.
      cancel(seq, now);
      o.cancelled = true;
      ++out.num_cancelled;
      any_left = true;
    } else if (hand_off_after_prefill_ && o.first_token) {
      seq.status = SeqStatus::HandedOff;
      o.handed_off = true;
      any_left = true;
    } else {
      if (any_drafts && result.num_drafts(static_cast<int>(k)) > 0)
        seq.set_draft_tokens(result.drafts_of(static_cast<int>(k)), result.num_drafts(static_cast<int>(k)));
      kept_tokens += seq.num_computed_tokens;
    }
  };
  if (!load_ahead_) {  // a lone instance (set_load_ahead)
    for (size_t k = 0; k < num_items; ++k) process(k);
  } else {
    for (size_t k = 0; k < std::min(kAhead, num_items); ++k) prefetch_sequence(items[k].seq);
    for (size_t k = 0; k < num_items; ++k) {
      if (k + kAhead < num_items) prefetch_sequence(items[k + kAhead].seq);
      if (k + kAhead / 2 < num_items) {
        const ScheduledSeq& ahead = items[k + kAhead / 2];
        const std::vector<int32_t>& t = ahead.seq->tokens();
        __builtin_prefetch(t.data() + t.size(), 1);
        kv_.prefetch_commit_data(*ahead.seq, ahead.seq->num_computed_tokens + ahead.num_new);
      }
      if (k + kNear < num_items) {
        const ScheduledSeq& near = items[k + kNear];
        if (near.num_draft == 0) kv_.prefetch_commit_slot(*near.seq, near.seq->num_computed_tokens + near.num_new);
      }
      process(k);
    }
  }
  // The items are distinct running sequences (schedule() takes them from
  // the running list or puts them there), so as many items as running
  // sequences means the batch held them all.
  step_running_tokens_ = num_items == running_.size() ? kept_tokens : -1;
  if (!any_left) return;
  // Finished sequences outlive this call until the next schedule(), so the
  // batch and the outcome that name them stay valid for whoever reads them.
  auto split = std::stable_partition(running_.begin(), running_.end(), [](const auto& s) {
    return s->status != SeqStatus::Finished && s->status != SeqStatus::HandedOff &&
           s->status != SeqStatus::Cancelled;
  });
  for (auto it = split; it != running_.end(); ++it) {
    if ((*it)->status == SeqStatus::Finished) {
      finished_.push_back(std::move(*it));
    } else if ((*it)->status == SeqStatus::Cancelled) {
      cancelled_.push_back(std::move(*it));
    } else {
      HandOff h;
      h.kv = kv_.export_blocks(**it);
      h.seq = std::move(*it);
      out.handed_off.push_back(std::move(h));
    }
  }
  running_.erase(split, running_.end());
}

std::vector<const Sequence*> Scheduler::live_sequences() const {
  std::vector<const Sequence*> out;
  for (const auto& s : running_) out.push_back(s.get());
  for (const auto& s : waiting_)
    if (!s->block_table.empty()) out.push_back(s.get());
  return out;
}

}  // namespace testbed
