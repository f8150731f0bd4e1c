#include "engine/scheduler.h"

#include <algorithm>

#include "engine/config_error.h"

namespace testbed {

void SchedulerConfig::validate() const {
  require(max_num_seqs > 0, "scheduler.max_num_seqs", "must be positive");
  require(max_batch_tokens > 0, "scheduler.max_batch_tokens", "must be positive");
  require(chunk_size > 0, "scheduler.chunk_size", "must be positive");
  require(SchedulingPolicyRegistry::instance().contains(policy), "scheduler.policy",
          "unknown policy '" + policy + "' (known: " + SchedulingPolicyRegistry::instance().names_joined() + ")");
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv, int max_model_len,
                     MetricsSink* sink, int instance)
    : config_(config), kv_(kv), max_model_len_(max_model_len), sink_(sink), instance_(instance) {
  config_.validate();
  policy_ = SchedulingPolicyRegistry::instance().create("scheduler.policy", config_.policy);
}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
  check_admissible(*seq);
  seq->status = SeqStatus::Waiting;
  insert_waiting(std::move(seq));
}

void Scheduler::check_admissible(const Sequence& seq) const {
  const int total = seq.num_prompt_tokens() + seq.max_output_tokens();
  const int blocks = (total + kv_.block_size() - 1) / kv_.block_size();
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
  if (key)
    throw ConfigError(std::string(key) + ": request " + std::to_string(seq.id()) + " (" +
                      std::to_string(seq.num_prompt_tokens()) + " prompt + " + std::to_string(seq.max_output_tokens()) +
                      " output tokens) " + why);
}

int Scheduler::chunk_limit(int remaining, int budget) const {
  int n = remaining;
  if (config_.chunked_prefill) n = std::min(n, config_.chunk_size);
  n = std::min(n, budget);
  // Without chunking a prompt is computed whole or not at all this step.
  if (!config_.chunked_prefill && n < remaining) return 0;
  return n;
}

Batch Scheduler::schedule(double /*now*/) {
  finished_.clear();
  Batch batch;
  batch.items.reserve(running_.size() + 8);
  int budget = config_.max_batch_tokens;
  scheduled_.assign(running_.size(), 0);
  // Returns how many running sequences are mid-prompt; the second pass only runs for them.
  if (schedule_running(batch, budget, /*decode_pass=*/true) > 0) schedule_running(batch, budget, /*decode_pass=*/false);
  if (batch.preempted.empty()) admit_waiting(batch, budget);
  for (const ScheduledSeq& item : batch.items) {
    if (item.is_decode())
      batch.num_decode_tokens += item.num_new;
    else
      batch.num_prefill_tokens += item.num_new;
  }
  return batch;
}

int Scheduler::schedule_running(Batch& batch, int& budget, bool decode_pass) {
  int num_other = 0;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    if (scheduled_[i]) continue;
    Sequence& seq = *running_[i];
    const int remaining = seq.num_tokens() - seq.num_computed_tokens;
    if (decode_pass != (remaining == 1)) {
      ++num_other;
      continue;
    }
    const int n = chunk_limit(remaining, budget);
    if (n == 0) continue;
    bool self_preempted = false;
    while (!kv_.allocate(seq, n)) {
      self_preempted = running_.back().get() == &seq;
      preempt_lowest(batch, budget);
      if (self_preempted) break;
    }
    if (self_preempted) break;  // it was the last running sequence
    batch.items.push_back({&seq, seq.num_computed_tokens, n});
    scheduled_[i] = 1;
    budget -= n;
  }
  return num_other;
}

void Scheduler::preempt_lowest(Batch& batch, int& budget) {
  std::unique_ptr<Sequence> victim = std::move(running_.back());
  running_.pop_back();
  const bool was_scheduled = scheduled_[running_.size()];
  scheduled_.pop_back();
  if (was_scheduled) {
    auto it = std::find_if(batch.items.begin(), batch.items.end(),
                           [&](const ScheduledSeq& s) { return s.seq == victim.get(); });
    budget += it->num_new;
    batch.items.erase(it);
  }
  kv_.free(*victim);
  victim->num_computed_tokens = 0;
  ++victim->num_preemptions;
  ++num_preemptions_;
  victim->status = SeqStatus::Waiting;
  batch.preempted.push_back(victim->id());
  insert_waiting(std::move(victim));
}

void Scheduler::admit_waiting(Batch& batch, int& budget) {
  if (waiting_.empty() || num_running() >= config_.max_num_seqs) return;
  SchedulerView view;
  view.num_waiting = num_waiting();
  view.num_running = num_running();
  for (const auto& s : running_)
    if (s->num_computed_tokens >= s->num_prompt_tokens()) ++view.num_running_decoding;

  while (!waiting_.empty() && budget > 0 && num_running() < config_.max_num_seqs && policy_->may_admit(view)) {
    Sequence& seq = *waiting_.front();
    const PrefixHit hit = kv_.find_cached_prefix(seq);
    const int n = chunk_limit(seq.num_tokens() - hit.num_tokens(), budget);
    if (n == 0 || !kv_.allocate(seq, n, hit)) break;
    if (seq.num_cached_tokens < 0) seq.num_cached_tokens = hit.num_tokens();
    seq.status = SeqStatus::Running;
    batch.items.push_back({&seq, seq.num_computed_tokens, n});
    budget -= n;
    std::unique_ptr<Sequence> owned = std::move(waiting_.front());
    waiting_.pop_front();
    insert_running(std::move(owned));
    ++view.num_running;
    --view.num_waiting;
  }
}

void Scheduler::insert_waiting(std::unique_ptr<Sequence> seq) {
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                              [&](const auto& a, const auto& b) { return policy_->before(*a, *b); });
  waiting_.insert(pos, std::move(seq));
}

void Scheduler::insert_running(std::unique_ptr<Sequence> seq) {
  auto pos = std::upper_bound(running_.begin(), running_.end(), seq,
                              [&](const auto& a, const auto& b) { return policy_->before(*a, *b); });
  const size_t index = pos - running_.begin();
  running_.insert(pos, std::move(seq));
  scheduled_.insert(scheduled_.begin() + index, 1);
}

void Scheduler::postprocess(const Batch& batch, const StepResult& result, double now) {
  if (result.tokens.size() != batch.items.size())
    throw ConfigError("executor: returned " + std::to_string(result.tokens.size()) + " tokens for " +
                      std::to_string(batch.items.size()) + " sequences");
  bool any_finished = false;
  for (size_t k = 0; k < batch.items.size(); ++k) {
    const ScheduledSeq& item = batch.items[k];
    Sequence& seq = *item.seq;
    seq.num_computed_tokens += item.num_new;
    kv_.commit_full_blocks(seq);
    if (!item.samples()) continue;
    const int32_t token = result.tokens[k];
    if (token < 0) throw ConfigError("executor: returned no token for sequence " + std::to_string(seq.id()));
    seq.append_token(token);
    if (seq.first_token_s < 0) {
      seq.first_token_s = now;
      if (sink_) sink_->on_first_token(instance_, seq, now);
    } else if (sink_) {
      sink_->on_token(instance_, seq, now, now - seq.last_token_s);
    }
    seq.last_token_s = now;
    if (seq.num_output_tokens() >= seq.max_output_tokens() || seq.num_tokens() >= max_model_len_) {
      finish(seq, now);
      any_finished = true;
    }
  }
  if (!any_finished) return;
  // Finished sequences outlive this call until the next schedule(), so the
  // batch that names them stays valid for whoever inspects it.
  auto split = std::stable_partition(running_.begin(), running_.end(),
                                     [](const auto& s) { return s->status != SeqStatus::Finished; });
  for (auto it = split; it != running_.end(); ++it) finished_.push_back(std::move(*it));
  running_.erase(split, running_.end());
}

void Scheduler::finish(Sequence& seq, double now) {
  kv_.free(seq);
  seq.status = SeqStatus::Finished;
  seq.finish_s = now;
  if (sink_) sink_->on_finish(instance_, seq, now);
  seq.release_storage();
}

std::vector<const Sequence*> Scheduler::live_sequences() const {
  std::vector<const Sequence*> out;
  for (const auto& s : running_) out.push_back(s.get());
  for (const auto& s : waiting_)
    if (!s->block_table.empty()) out.push_back(s.get());
  return out;
}

}  // namespace testbed
