// Test helpers: small models and engines, and a loop that runs an engine on a
// virtual clock (each step lasts a fixed time) so tests never depend on timing.
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu_executor.h"
#include "engine/engine.h"
#include "engine/request_source.h"
#include "engine/metrics/run_recorder.h"
#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"
#include "engine/common/rng.h"

namespace testbed::test {

// A Llama-style model small enough for many runs per test.
inline ModelConfig micro_model(int vocab = 512, int layers = 2, int hidden = 64, int heads = 4, int kv_heads = 2) {
  const std::string json = "{\"hidden_size\": " + std::to_string(hidden) +
                           ", \"intermediate_size\": " + std::to_string(hidden * 2) +
                           ", \"num_hidden_layers\": " + std::to_string(layers) +
                           ", \"num_attention_heads\": " + std::to_string(heads) +
                           ", \"num_key_value_heads\": " + std::to_string(kv_heads) +
                           ", \"vocab_size\": " + std::to_string(vocab) +
                           ", \"max_position_embeddings\": 1024, \"initializer_range\": 0.1}";
  return ModelConfig::from_json_text(json, "micro");
}

inline std::vector<int32_t> random_tokens(Rng& rng, int n, int vocab) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng.below(vocab));
  return t;
}

// Requests from a list, in its order (arrival_s must not decrease).
class ListSource : public RequestSource {
 public:
  explicit ListSource(std::vector<Request> r) : r_(std::move(r)) {}
  std::optional<Request> next() override {
    if (i_ >= r_.size()) return std::nullopt;
    return r_[i_++];
  }
  int64_t size_hint() const override { return static_cast<int64_t>(r_.size()); }

 private:
  std::vector<Request> r_;
  size_t i_ = 0;
};

// Requests sharing a prefix, with staggered arrivals.
inline std::vector<Request> shared_prefix_requests(int n, int prefix_len, int unique_len, int output_len, int vocab,
                                                   uint64_t seed, double gap_s) {
  Rng rng(seed);
  const std::vector<int32_t> prefix = random_tokens(rng, prefix_len, vocab);
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    r.arrival_s = i * gap_s;
    r.prompt = prefix;
    const auto tail = random_tokens(rng, unique_len + static_cast<int>(rng.below(5)), vocab);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.max_output_tokens = output_len;
    out.push_back(std::move(r));
  }
  return out;
}

// Runs the engine until every request finished: arrivals are released at their
// times on a virtual clock where each step lasts `step_s`. `check` runs after each step.
template <class Check>
void run_virtual(Engine& engine, std::vector<Request> requests, double step_s, Check check) {
  double now = 0.0;
  size_t next = 0;
  while (next < requests.size() || engine.has_unfinished()) {
    if (!engine.has_unfinished() && requests[next].arrival_s > now) now = requests[next].arrival_s;
    while (next < requests.size() && requests[next].arrival_s <= now) engine.add_request(requests[next++], now);
    const StepPlan plan = engine.begin_step(now);
    if (plan.empty()) throw std::runtime_error("engine made no progress");
    const StepResult result = engine.executor().execute(plan.batch);
    engine.end_step(plan, result, now + step_s);
    now += step_s;
    check(engine, plan.batch);
  }
}

inline void run_virtual(Engine& engine, std::vector<Request> requests, double step_s = 0.01) {
  run_virtual(engine, std::move(requests), step_s, [](Engine&, const Batch&) {});
}

// Output tokens per request id, from a recorder that kept them.
inline std::map<int64_t, std::vector<int32_t>> outputs_by_id(const RunRecorder& rec) {
  std::map<int64_t, std::vector<int32_t>> out;
  for (size_t i = 0; i < rec.output_token_ids().size(); ++i) out[rec.output_token_ids()[i]] = rec.output_tokens()[i];
  return out;
}

}  // namespace testbed::test
