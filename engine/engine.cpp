#include "engine/engine.h"

namespace testbed {

Engine::Engine(int instance, const EngineConfig& config, int num_blocks, std::unique_ptr<Executor> executor,
               MetricsSink* sink)
    : instance_(instance),
      kv_(num_blocks, config.cache.block_size, config.cache.prefix_cache),
      sink_(sink),
      scheduler_(config.scheduler, kv_, config.max_model_len, sink, instance),
      executor_(std::move(executor)) {
  if (sink_) kv_.add_listener(this);
}

void Engine::add_request(Request request, double now) {
  auto seq = std::make_unique<Sequence>(std::move(request));
  scheduler_.check_admissible(*seq);
  // Hash the prompt's blocks on arrival, as vLLM's engine core does when it
  // adds a request, so scheduling steps only look them up.
  if (kv_.prefix_cache_enabled()) seq->block_hashes(kv_.block_size());
  if (sink_) sink_->on_arrival(instance_, *seq, now);
  scheduler_.add(std::move(seq));
}

Batch Engine::schedule(double now) { return scheduler_.schedule(now); }

void Engine::complete_step(const Batch& batch, const StepResult& result, double start_s, double end_s) {
  scheduler_.postprocess(batch, result, end_s);
  if (!sink_) return;
  StepRecord rec;
  rec.instance = instance_;
  rec.start_s = start_s;
  rec.duration_s = end_s - start_s;
  rec.num_seqs = batch.num_seqs();
  rec.prefill_tokens = batch.num_prefill_tokens;
  rec.decode_tokens = batch.num_decode_tokens;
  rec.kv_blocks_used = kv_.num_used_blocks();
  rec.num_preempted = static_cast<int>(batch.preempted.size());
  rec.num_waiting = scheduler_.num_waiting();
  rec.num_running = scheduler_.num_running();
  sink_->on_step(rec);
}

void Engine::on_kv_event(const KvEvent& event) { sink_->on_kv_event(instance_, event); }

}  // namespace testbed
