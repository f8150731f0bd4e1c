// Request: what a client sends. Prompt token ids, sampling parameters, the
// target output length (trace semantics: generate exactly this many tokens,
// as vLLM's ignore_eos), and its arrival time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace testbed {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  uint64_t seed = 0;         // with the request id and position, fixes every draw
};

struct Request {
  int64_t id = 0;
  double arrival_s = 0.0;
  std::vector<int32_t> prompt;
  int max_output_tokens = 1;
  // Seconds the front end took before the engine saw it (frontend.request_s):
  // the client sent it at arrival_s - frontend_s, which TTFT and E2E count from.
  double frontend_s = 0.0;
  SamplingParams sampling;
  uint64_t cache_salt = 0;  // extra key of every block hash (model, adapter, tenant)
  int64_t session_id = -1;  // multi-turn traces: the conversation this turn belongs to
  int priority = 0;         // lower is more urgent (scheduler.policy = priority); from the workload or trace
  // Optional: the tokens a simulated executor emits for this request (a
  // generator that knows the "answer" of a turn, so later turns can share it).
  std::vector<int32_t> scripted_output;
  // Optional: block hashes of the prompt already computed upstream (a router
  // hashed it to choose the instance), valid for blocks of prompt_hash_block_size.
  std::vector<uint64_t> prompt_block_hashes;
  int prompt_hash_block_size = 0;
  // The client: it disconnects cancel_after_s after sending the request (< 0:
  // never), or once it holds cancel_after_tokens output tokens (0: never).
  double cancel_after_s = -1.0;
  int cancel_after_tokens = 0;
  int restarts = 0;  // times it started over elsewhere because its instance failed (sim/faults.h)
  // What the ingress knows of the question (engine/semantic_cache.h, model routing):
  int64_t intent = -1;           // the question asked (-1: unknown): a cache answer is correct when intents match
  std::vector<float> embedding;  // unit-norm prompt embedding (empty: none)
  int request_class = -1;        // difficulty class, 0 the easiest (-1: none)
  // Set by a model router (sim/model_router.h): the class whose pool serves it,
  // and whether that pool's answer fails in quality (a model too small for it).
  int routed_class = -1;
  bool quality_failure = false;
};

}  // namespace testbed
