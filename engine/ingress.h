// Ingress: the semantic response cache (engine/semantic_cache.h) in front of
// one engine on the wall clock (run_offline, run_realtime; the simulated
// fleet has its own, sim/fleet.cpp). Every request the driver releases is
//   1. embedded by the engine's executor (Executor::embed: the model's
//      mean-pooled final hidden states, a real forward pass over the prompt
//      that the engine's CPU also pays for); an executor without embed falls
//      back to the request's own Request::embedding (the workload's);
//   2. looked up: exact prompt match, then HNSW nearest neighbour at cos >= tau.
// The measured wall time of the two is the request's ingress time. A hit is
// answered through MetricsSink::on_cache_answer when its lookup ends and never
// reaches the engine; a miss goes on to the engine, and when the engine
// finishes it (a StepOutcome seq with `finished`) its prompt, the embedding its
// lookup used and its intent are cached for later askers.
//
// Time: the ingress is one queue on the driver's thread. A lookup starts when
// the driver hands the request over or when the previous lookup ended, if
// later, and lasts its measured time; a miss reaches the engine when its
// lookup ends (Request::arrival_s moves there and the difference is added to
// Request::frontend_s, so the client's send time stays put, as the fleet does
// with ingress.lookup_s).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/executor.h"
#include "engine/metrics_sink.h"
#include "engine/request.h"
#include "engine/semantic_cache.h"
#include "engine/step.h"

namespace testbed {

class Ingress {
 public:
  // `executor` embeds (the engine's, so the cost lands on the same CPU); `sink` hears the answers.
  Ingress(const SemanticCacheConfig& config, Executor& executor, MetricsSink* sink);

  // Embeds and looks up `request`, handed over at `now` (the driver's clock).
  // True: a miss, `request` (arrival_s, frontend_s moved) goes to the engine
  // at ready_s() or later. False: answered from the cache, `request` is done.
  // Throws ConfigError naming the key when its embedding does not fit the cache.
  bool admit(Request& request, double now);
  // Caches the answers of the sequences `out` finished (at out.end_s).
  void on_step(const StepOutcome& out);

  // When the last lookup ended (-infinity before the first).
  double ready_s() const { return ready_s_; }
  int64_t num_answered() const { return num_answered_; }
  // Every lookup's measured seconds (embedding + search), by request id, in order.
  const std::vector<std::pair<int64_t, double>>& lookup_seconds() const { return lookup_s_; }
  const SemanticCacheStats& stats() const;

 private:
  SemanticCacheConfig config_;
  Executor& executor_;
  MetricsSink* sink_;
  std::unique_ptr<SemanticCache> cache_;  // made at the first lookup: its dimension is the first embedding's
  int dim_ = -1;
  bool model_embeds_ = true;  // until the executor says it cannot
  double ready_s_ = -std::numeric_limits<double>::infinity();
  double cache_now_ = 0.0;  // the cache's clock: never decreases
  int64_t num_answered_ = 0;
  std::unordered_map<int64_t, std::vector<float>> in_flight_;  // misses the engine holds: id -> embedding used
  std::vector<std::pair<int64_t, double>> lookup_s_;
  std::vector<int32_t> prompt_;   // reused
  std::vector<float> embedding_;  // reused
};

}  // namespace testbed
