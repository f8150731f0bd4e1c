// Scheduler: iteration-level (continuous) batching over a KvCacheManager.
//
//   scheduler.schedule(now, batch);                         // which sequences, which positions each
//   StepResult r = executor.execute(batch);
//   scheduler.postprocess(batch, r, now_after_step, out);   // accept/roll back, append, commit, finish
//
// It never reads a clock, includes nothing from the GPU side and reports to
// no one: what a step did goes into the StepOutcome the Engine hands out.
// That is why the real engines and the simulator run this very object.
//
// Each step, under max_num_seqs sequences and max_batch_tokens positions:
//   1. running sequences that decode (one known token, plus any proposed
//      tokens that fit) come first, so decodes never stall behind prefills
//      (Sarathi-Serve's stall-free batching);
//   2. running sequences in the middle of a prompt (or recomputing) get their
//      next chunk (at most chunk_size tokens with chunked prefill, else the rest);
//   3. waiting sequences are admitted in policy order, starting from their
//      prefix-cache hit, while blocks and budget last (none after a preemption).
// Before all that, sequences whose client has gone (Request::cancel_after_s
// passed) are cancelled, waiting or running: their blocks are freed at once,
// as vLLM aborts a request between steps when its client disconnects. A
// client that leaves after N tokens (cancel_after_tokens) is cancelled in
// postprocess, the step that delivers its Nth token.
// When blocks run out, proposed tokens are dropped first, then the policy's
// victim (the newest, under fcfs) is preempted by recompute: its blocks are
// freed and it waits again. Running sequences are served in arrival order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "engine/batch.h"
#include "engine/common/choice.h"
#include "engine/common/load_ahead.h"
#include "engine/kv_cache_manager.h"
#include "engine/scheduling_policy.h"
#include "engine/step.h"

namespace testbed {

class OptionTable;

struct SchedulerConfig {
  int max_num_seqs = 256;
  int max_batch_tokens = 8192;
  bool chunked_prefill = true;
  int chunk_size = 2048;  // most prompt tokens one sequence gets per step
  Choice<SchedulingPolicyRegistry> policy{"scheduler.policy", "fcfs", "scheduling policy"};
  // KV reserved when a sequence is admitted, as systems before paged attention
  // did (vLLM paper, Kwon et al. SOSP '23, section 6.2): paged (none: blocks as
  // tokens come), max_length (model.max_model_len tokens), pow2 (the next power
  // of two of prompt + output, at most max_model_len), oracle (exactly prompt + output).
  std::string kv_reservation = "paged";
  // Admission keeps this share of the KV blocks free for running sequences to
  // grow into (vLLM's block-manager watermark, 0.01 there); 0: admit while blocks last.
  double admission_watermark = 0.0;
  void bind(OptionTable& table);
  void validate() const;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv, int max_model_len);

  // Queues a new sequence. Throws ConfigError when it can never run under this
  // configuration (longer than the model, the KV cache, or an unchunked step).
  void add(std::unique_ptr<Sequence> seq, double now);
  void check_admissible(const Sequence& seq) const;
  // Why `seq` can never run here, naming the limiting key ("" when it can).
  std::string admission_error(const Sequence& seq) const;
  int max_model_len() const { return max_model_len_; }
  // A sequence whose KV was imported from another engine: it runs from now on.
  void add_running(std::unique_ptr<Sequence> seq);
  // Prefill instances: a sequence whose prompt is done leaves the engine
  // after its first token (StepOutcome::handed_off) instead of decoding here.
  void set_hand_off_after_prefill(bool on) { hand_off_after_prefill_ = on; }
  bool hands_off_after_prefill() const { return hand_off_after_prefill_; }
  // Whether schedule() and postprocess() load the batch's sequences a few
  // items ahead (on: the default, for an engine among others whose steps
  // push its state out of the cache). A lone simulated instance turns it
  // off: its sequences stay in the cache, and computing what to load cost 94M
  // of the Azure trace's 3,914M instructions (cachegrind) for nothing.
  // Results are the same either way.
  void set_load_ahead(bool on) { load_ahead_ = on; }
  // Where this engine's scheduler.* and cache.* keys live, for errors ("pool.decode." in a pool).
  void set_key_prefix(std::string prefix) { key_prefix_ = std::move(prefix); }

  // KV tokens the running sequences hold (their computed tokens).
  int64_t num_running_tokens() const;
  // The same, right after postprocess() (before anything else changes the
  // running sequences): summed there when the batch held every running
  // sequence, which spares a pass over them all (in a fleet, cold ones).
  int64_t num_running_tokens_after_step() const {
    return step_running_tokens_ >= 0 ? step_running_tokens_ : num_running_tokens();
  }
  // Loads what the next schedule() and postprocess() read first (the
  // running list, the policy): a large fleet's instance is out of the cache
  // by its next step (engine/common/load_ahead.h). Changes nothing.
  void load_state() const {
    load_lines(running_.data(), std::min<size_t>(running_.size() * sizeof(running_[0]), 256));
    load_lines(scheduled_.data(), std::min<size_t>(scheduled_.size(), 64));
    load_lines(policy_.get(), 1);  // its first line (its size is its type's)
  }

  // Forms this step's batch into `batch` (its buffers are reused).
  void schedule(double now, Batch& batch);
  // Applies what the executor returned for `batch` and writes what the step
  // did into `out`. Throws std::logic_error when the result breaks the
  // executor contract (wrong shape, tokens for an item that does not sample,
  // more tokens than the item verified, accepted tokens that are not its drafts).
  // `visible_s`: when clients see this step's tokens (its end, or later through
  // the front end); the sequences' delivery times are set to it.
  void postprocess(const Batch& batch, const StepResult& result, double visible_s, StepOutcome& out);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  // Every waiting and running sequence, their blocks freed (the instance failed).
  std::vector<std::unique_ptr<Sequence>> take_all();
  // Sequences cancelled since the last schedule() began (by deadline in it, by
  // token count in postprocess), alive until the next schedule().
  const RunningList& cancelled() const { return cancelled_; }
  int64_t num_cancelled() const { return num_cancelled_; }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }
  const KvCacheManager& kv_cache() const { return kv_; }
  // Sequences holding blocks (for invariant checks).
  std::vector<const Sequence*> live_sequences() const;

 private:
  int schedule_running(Batch& batch, int& budget, bool decode_pass, double now);
  void admit_waiting(Batch& batch, int& budget, double now);
  void preempt(size_t victim, Batch& batch, int& budget, double now);
  // Checks the tokens an item that verified proposals returned and rolls its rejected positions back.
  void accept_drafts(const ScheduledSeq& item, const int32_t* tokens, int n);
  void insert_waiting(std::unique_ptr<Sequence> seq, double now);
  void watch_deadline(const Sequence& seq);
  // Cancels every waiting or running sequence whose client left by `now`.
  void cancel_due(double now);
  void cancel(Sequence& seq, double now);
  void insert_running(std::unique_ptr<Sequence> seq);
  int chunk_limit(int remaining, int budget) const;
  // Tokens of KV reserved for seq at admission under scheduler.kv_reservation (0: paged).
  int reservation_tokens(const Sequence& seq) const;

  SchedulerConfig config_;
  KvCacheManager& kv_;
  int max_model_len_;
  int watermark_blocks_ = 0;
  bool hand_off_after_prefill_ = false;
  bool load_ahead_ = true;
  std::string key_prefix_;
  std::unique_ptr<SchedulingPolicy> policy_;
  SequenceQueue waiting_;
  RunningList running_;
  RunningList finished_;         // by the last postprocess, alive until the next schedule()
  RunningList cancelled_;        // see cancelled()
  // Client deadlines (time, sequence id) of the sequences that have one, soonest first;
  // an entry whose sequence has left is dropped when it comes up.
  std::priority_queue<std::pair<double, int64_t>, std::vector<std::pair<double, int64_t>>, std::greater<>> deadlines_;
  int64_t num_cancelled_ = 0;
  // Per running index, during schedule(): whether this step scheduled it. Not
  // char: a store through a char may alias anything, so each one made the
  // scheduling loop reload every vector it reads.
  enum class Mark : uint8_t { No, Yes };
  std::vector<Mark> scheduled_;
  int64_t step_running_tokens_ = -1;  // postprocess's sum (-1: the batch missed a running sequence)
  int64_t num_preemptions_ = 0;
  PrefixHit hit_;  // admit_waiting's prefix lookup, its array kept from one admission to the next
};

}  // namespace testbed
