#include "engine/ingress.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "engine/common/config_error.h"
#include "engine/sequence.h"

namespace testbed {

Ingress::Ingress(const SemanticCacheConfig& config, Executor& executor, MetricsSink* sink)
    : config_(config), executor_(executor), sink_(sink) {}

const SemanticCacheStats& Ingress::stats() const {
  static const SemanticCacheStats none;
  return cache_ ? cache_->stats() : none;
}

bool Ingress::admit(Request& request, double now) {
  const double start = std::max(now, ready_s_);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string who = "request " + std::to_string(request.id);
  bool embedded = false;
  if (model_embeds_) {
    try {
      embedded = executor_.embed(request.prompt, embedding_);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("workload: " + who + ": " + e.what());
    }
    model_embeds_ = embedded;  // an executor without embed never gains one
  }
  const std::vector<float>& used = embedded ? embedding_ : request.embedding;
  if (!cache_) {
    // The first request fixes the dimension: the model's hidden size, or the workload's embeddings (0: exact only).
    dim_ = static_cast<int>(used.size());
    cache_ = std::make_unique<SemanticCache>(config_, dim_);
  }
  if (!used.empty() && static_cast<int>(used.size()) != dim_)
    throw ConfigError("ingress.semantic_cache: " + who + "'s embedding has " + std::to_string(used.size()) +
                      " values, the cache's " + std::to_string(dim_) +
                      " (the first request's): give every request embeddings of one length, or none");
  cache_now_ = std::max(cache_now_, start);
  SemanticCache::Lookup hit;
  try {
    hit = cache_->lookup(request.prompt, used, cache_now_);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("ingress.semantic_cache: " + who + ": " + e.what());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double end = start + seconds;
  ready_s_ = end;
  lookup_s_.emplace_back(request.id, seconds);
  if (hit.is_hit()) {
    const bool semantic = hit.kind == SemanticCache::Lookup::Kind::Semantic;
    const bool correct = request.intent < 0 || hit.intent == request.intent;
    if (sink_) sink_->on_cache_answer(request, end, semantic, correct);
    ++num_answered_;
    return false;
  }
  in_flight_[request.id] = used;
  // The engine sees it when the lookup ends; the wait before is the front end's.
  request.frontend_s += std::max(0.0, end - request.arrival_s);
  request.arrival_s = std::max(end, request.arrival_s);
  return true;
}

void Ingress::on_step(const StepOutcome& out) {
  for (const SeqOutcome& o : out.seqs) {
    if (!o.finished && !o.cancelled) continue;
    const Sequence& seq = *o.seq;
    const auto it = in_flight_.find(seq.id());
    if (it == in_flight_.end()) continue;  // not looked up here
    if (o.finished && cache_) {
      // The answer exists now: later askers of this question may get it.
      cache_now_ = std::max(cache_now_, out.end_s);
      prompt_.assign(seq.tokens().begin(), seq.tokens().begin() + seq.num_prompt_tokens());
      cache_->insert(prompt_, it->second, seq.request().intent, cache_now_);
    }
    in_flight_.erase(it);
  }
}

}  // namespace testbed
