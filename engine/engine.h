// Engine = Scheduler + KvCacheManager + Executor: one serving instance, the same
// object whether a wall-clock driver or the discrete-event simulator runs it.
//
//   Batch batch = engine.schedule(now);                 // step begins
//   StepResult result = engine.executor().execute(batch);
//   engine.complete_step(batch, result, start, end);    // step ends
//
// A real driver calls the three in a row on the wall clock (run_step does); the
// simulator calls complete_step at the event time start + result.duration_s.
#pragma once

#include <memory>

#include "engine/executor.h"
#include "engine/kv_cache_manager.h"
#include "engine/metrics_sink.h"
#include "engine/scheduler.h"

namespace testbed {

struct EngineConfig {
  SchedulerConfig scheduler;
  CacheConfig cache;
  int max_model_len = 4096;
};

class Engine : private KvEventListener {
 public:
  // num_blocks: KV capacity, resolved by the caller (from config or memory).
  Engine(int instance, const EngineConfig& config, int num_blocks, std::unique_ptr<Executor> executor,
         MetricsSink* sink);

  int instance() const { return instance_; }
  void add_request(Request request, double now);

  Batch schedule(double now);
  void complete_step(const Batch& batch, const StepResult& result, double start_s, double end_s);

  bool has_unfinished() const { return scheduler_.has_unfinished(); }
  Scheduler& scheduler() { return scheduler_; }
  const Scheduler& scheduler() const { return scheduler_; }
  KvCacheManager& kv_cache() { return kv_; }
  const KvCacheManager& kv_cache() const { return kv_; }
  Executor& executor() { return *executor_; }

 private:
  void on_kv_event(const KvEvent& event) override;

  int instance_;
  KvCacheManager kv_;
  MetricsSink* sink_;
  Scheduler scheduler_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace testbed
