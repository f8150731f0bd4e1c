// Scheduler: iteration-level (continuous) batching over a KvCacheManager.
//
//   Batch b = scheduler.schedule(now);             // which sequences, how many tokens each
//   StepResult r = executor.execute(b);
//   scheduler.postprocess(b, r, now_after_step);   // append tokens, finish, free
//
// It never reads a clock and includes nothing from the GPU side, which is why the
// real engines and the simulator run this very object.
//
// Each step, under max_num_seqs sequences and max_batch_tokens tokens:
//   1. running sequences that decode (one token each) come first, so decodes
//      never stall behind prefills (Sarathi-Serve's stall-free batching);
//   2. running sequences in the middle of a prompt get their next chunk
//      (at most chunk_size tokens with chunked prefill, else the whole rest);
//   3. waiting sequences are admitted in policy order, starting from their
//      prefix-cache hit, while blocks and budget last (none after a preemption).
// When blocks run out, the lowest-priority running sequence (the newest, under
// fcfs) is preempted by recompute: its blocks are freed and it waits again.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "engine/batch.h"
#include "engine/kv_cache_manager.h"
#include "engine/metrics_sink.h"
#include "engine/scheduling_policy.h"

namespace testbed {

struct SchedulerConfig {
  int max_num_seqs = 256;
  int max_batch_tokens = 8192;
  bool chunked_prefill = true;
  int chunk_size = 2048;  // most prompt tokens one sequence gets per step
  std::string policy = "fcfs";
  void validate() const;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv, int max_model_len,
            MetricsSink* sink = nullptr, int instance = 0);

  // Queues a new sequence. Throws ConfigError when it can never run under this
  // configuration (longer than the model, the KV cache, or an unchunked step).
  void add(std::unique_ptr<Sequence> seq);
  void check_admissible(const Sequence& seq) const;

  Batch schedule(double now);
  void postprocess(const Batch& batch, const StepResult& result, double now);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }
  const KvCacheManager& kv_cache() const { return kv_; }
  // Sequences holding blocks (for invariant checks).
  std::vector<const Sequence*> live_sequences() const;

 private:
  int schedule_running(Batch& batch, int& budget, bool decode_pass);
  void admit_waiting(Batch& batch, int& budget);
  void preempt_lowest(Batch& batch, int& budget);
  void insert_waiting(std::unique_ptr<Sequence> seq);
  void insert_running(std::unique_ptr<Sequence> seq);
  void finish(Sequence& seq, double now);
  int chunk_limit(int remaining, int budget) const;

  SchedulerConfig config_;
  KvCacheManager& kv_;
  int max_model_len_;
  MetricsSink* sink_;
  int instance_;
  std::unique_ptr<SchedulingPolicy> policy_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<std::unique_ptr<Sequence>> finished_;  // by the last postprocess
  std::vector<char> scheduled_;  // per running index, during schedule()
  int64_t num_preemptions_ = 0;
};

}  // namespace testbed
