// Workloads: synthetic generators and trace readers behind RequestSource, chosen
// by workload.kind through one registry. Every source is seeded and lazy: the
// same config and seed give the same requests bit for bit, and no source holds
// more than its active state (a trace is read line by line). Kinds and keys are
// documented in traces/README.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/registry.h"
#include "engine/request.h"
#include "engine/request_source.h"

namespace testbed {

class OptionTable;

// trace.* keys: workload.kind = trace replays a recorded trace file.
struct TraceConfig {
  std::string format = "mooncake";  // mooncake | azure | burstgpt (a registered TraceFormat)
  std::string path;                 // the trace file (required with workload.kind = trace)
  double time_scale = 1.0;          // multiplies the trace's gaps: 0.5 = twice the rate
  int64_t max_requests = 0;         // 0 = every row
  std::string arrivals = "trace";   // trace | poisson | gamma | constant (generated at workload.rate)
  int output_tokens = 0;            // > 0 overrides every row's output length
};

struct WorkloadConfig {
  std::string kind = "shared_prefix";
  int64_t num_requests = 100;
  double rate = 1.0;                // requests per second; 0 = everything at t = 0
  std::string arrival = "poisson";  // poisson | gamma | constant
  double burstiness = 1.0;          // gamma shape k: CV^2 = 1/k (1 = Poisson, < 1 burstier)
  int system_prompt_tokens = 2000;  // shared_prefix, multi_turn, rag: the shared system prompt
  int user_tokens = 200;            // shared_prefix: user message; multi_turn: per turn; rag: question
  int output_tokens = 200;
  int num_prefixes = 1;  // shared_prefix: distinct system prompts, drawn uniformly
  // multi_turn: chat sessions whose every turn extends the previous one.
  int turns = 5;             // turns per session
  double turn_gap_s = 10.0;  // mean think time between a session's turns (exponential)
  // rag: system prompt + documents drawn by Zipf popularity + question.
  int num_documents = 1000;
  int document_tokens = 500;
  int documents_per_request = 4;
  double zipf_s = 1.0;  // popularity of rank r is proportional to 1 / r^s
  // llmd: llm-d's prefix-routing benchmark (customers with a shared context each).
  int num_customers = 150;
  int users_per_customer = 5;
  int prefix_tokens = 6000;     // each customer's shared context
  int user_context_tokens = 0;  // optional per-user context after the customer prefix
  int query_tokens = 1200;      // unique question of each request
  uint64_t seed = 1;
  TraceConfig trace;

  // Registers the workload.* and trace.* keys (the CLI's one table of keys).
  void bind(OptionTable& table);
  void validate() const;
  // Longest sequence (prompt + output) the workload produces, when a generator
  // knows it in advance; 0 when only reading the trace would tell.
  int max_sequence_tokens() const;
  // Leading prompt tokens most requests share with others (a system prompt, a
  // customer prefix), 0 when unknown: profiles use it to lay out KV the way
  // prefix caching shares it.
  int shared_prefix_tokens() const;
};

// What a source needs from the rest of the run.
struct WorkloadContext {
  int vocab_size = 32000;
  SamplingParams sampling;
};

using WorkloadRegistry = Registry<RequestSource, const WorkloadConfig&, const WorkloadContext&>;

std::unique_ptr<RequestSource> make_workload(const WorkloadConfig& config, const WorkloadContext& context);

}  // namespace testbed
