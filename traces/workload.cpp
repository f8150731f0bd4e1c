// WorkloadConfig: keys, validation, and the factory that picks a source by workload.kind.
#include "traces/workload.h"

#include "engine/config_error.h"
#include "experiments/cli/option_table.h"
#include "traces/trace_format.h"

namespace testbed {

void WorkloadConfig::bind(OptionTable& t) {
  t.add("workload.kind", &kind, "shared_prefix | multi_turn | rag | llmd | trace");
  t.add("workload.num_requests", &num_requests, "requests to generate (generators)");
  t.add("workload.rate", &rate, "arrivals per second (0: all at t=0)");
  t.add("workload.arrival", &arrival, "poisson | gamma | constant");
  t.add("workload.burstiness", &burstiness, "gamma shape (1 = Poisson, < 1 burstier)");
  t.add("workload.system_prompt_tokens", &system_prompt_tokens, "shared system prompt length");
  t.add("workload.user_tokens", &user_tokens, "user message (per turn; rag: question) length");
  t.add("workload.output_tokens", &output_tokens, "output tokens per request");
  t.add("workload.num_prefixes", &num_prefixes, "shared_prefix: distinct system prompts");
  t.add("workload.turns", &turns, "multi_turn: turns per session");
  t.add("workload.turn_gap_s", &turn_gap_s, "multi_turn: mean think time between turns (s)");
  t.add("workload.num_documents", &num_documents, "rag: documents in the pool");
  t.add("workload.document_tokens", &document_tokens, "rag: tokens per document");
  t.add("workload.documents_per_request", &documents_per_request, "rag: documents in each prompt");
  t.add("workload.zipf_s", &zipf_s, "rag: Zipf exponent of document popularity (0 = uniform)");
  t.add("workload.num_customers", &num_customers, "llmd: customers (groups), each with its own prefix");
  t.add("workload.users_per_customer", &users_per_customer, "llmd: users per customer");
  t.add("workload.prefix_tokens", &prefix_tokens, "llmd: shared context of each customer");
  t.add("workload.user_context_tokens", &user_context_tokens, "llmd: per-user context after the prefix");
  t.add("workload.query_tokens", &query_tokens, "llmd: unique query of each request");
  t.add("workload.seed", &seed, "seed of lengths, contents and arrivals");
  t.add("trace.format", &trace.format, "mooncake | azure | burstgpt");
  t.add("trace.path", &trace.path, "trace file (workload.kind = trace)");
  t.add("trace.time_scale", &trace.time_scale, "multiplies trace gaps (0.5 = twice the rate)");
  t.add("trace.max_requests", &trace.max_requests, "stop after this many requests (0: all)");
  t.add("trace.arrivals", &trace.arrivals, "trace | poisson | gamma | constant (at workload.rate)");
  t.add("trace.output_tokens", &trace.output_tokens, "output length of every request (0: from trace)");
}

namespace {

bool is_arrival_process(const std::string& s) { return s == "poisson" || s == "gamma" || s == "constant"; }

// The longest sequence in 64 bits, so validate() can refuse configs that overflow int.
int64_t longest_sequence(const WorkloadConfig& c) {
  const int64_t out = c.output_tokens;
  if (c.kind == "shared_prefix") return int64_t{c.system_prompt_tokens} + c.user_tokens + out;
  if (c.kind == "multi_turn") return c.system_prompt_tokens + int64_t{c.turns} * (int64_t{c.user_tokens} + out);
  if (c.kind == "rag")
    return c.system_prompt_tokens + int64_t{c.documents_per_request} * c.document_tokens + c.user_tokens + out;
  if (c.kind == "llmd") return int64_t{c.prefix_tokens} + c.user_context_tokens + c.query_tokens + out;
  return 0;
}

}  // namespace

void WorkloadConfig::validate() const {
  require(WorkloadRegistry::instance().contains(kind), "workload.kind",
          "unknown workload '" + kind + "' (known: " + WorkloadRegistry::instance().names_joined() + ")");
  require(num_requests > 0, "workload.num_requests", "must be positive");
  require(rate >= 0, "workload.rate", "must be >= 0 (0 = all at t=0)");
  require(is_arrival_process(arrival), "workload.arrival",
          "unknown arrival process '" + arrival + "' (known: constant, gamma, poisson)");
  require(burstiness > 0, "workload.burstiness", "must be positive");
  require(system_prompt_tokens >= 0, "workload.system_prompt_tokens", "must be >= 0");
  require(user_tokens >= 0, "workload.user_tokens", "must be >= 0");
  require(system_prompt_tokens + user_tokens > 0, "workload.user_tokens", "a prompt needs at least one token");
  require(output_tokens > 0, "workload.output_tokens", "must be positive");
  require(num_prefixes > 0, "workload.num_prefixes", "must be positive");

  require(turns > 0, "workload.turns", "must be positive");
  require(turn_gap_s >= 0, "workload.turn_gap_s", "must be >= 0");
  require(num_documents > 0, "workload.num_documents", "must be positive");
  require(document_tokens > 0, "workload.document_tokens", "must be positive");
  require(documents_per_request >= 0 && documents_per_request <= num_documents, "workload.documents_per_request",
          "must be in [0, workload.num_documents]");
  require(zipf_s >= 0, "workload.zipf_s", "must be >= 0 (0 = uniform)");
  require(num_customers > 0, "workload.num_customers", "must be positive");
  require(users_per_customer > 0, "workload.users_per_customer", "must be positive");
  require(prefix_tokens >= 0, "workload.prefix_tokens", "must be >= 0");
  require(user_context_tokens >= 0, "workload.user_context_tokens", "must be >= 0");
  require(query_tokens >= 0, "workload.query_tokens", "must be >= 0");
  require(int64_t{prefix_tokens} + user_context_tokens + query_tokens > 0, "workload.query_tokens",
          "an llmd prompt needs at least one token");
  require(longest_sequence(*this) < (int64_t{1} << 30), "workload.kind",
          "'" + kind + "' sequences would exceed 2^30 tokens; check the length keys");

  require(
      TraceFormatRegistry::instance().contains(trace.format), "trace.format",
      "unknown trace format '" + trace.format + "' (known: " + TraceFormatRegistry::instance().names_joined() + ")");
  require(!(kind == "trace" && trace.path.empty()), "trace.path", "workload.kind = trace needs a trace file");
  require(trace.time_scale > 0, "trace.time_scale", "must be positive");
  require(trace.max_requests >= 0, "trace.max_requests", "must be >= 0 (0 = all)");
  require(trace.arrivals == "trace" || is_arrival_process(trace.arrivals), "trace.arrivals",
          "unknown arrivals '" + trace.arrivals + "' (known: constant, gamma, poisson, trace)");
  require(trace.output_tokens >= 0, "trace.output_tokens", "must be >= 0 (0 = from the trace)");
}

int WorkloadConfig::max_sequence_tokens() const { return static_cast<int>(longest_sequence(*this)); }

int WorkloadConfig::shared_prefix_tokens() const {
  if (kind == "shared_prefix" || kind == "multi_turn" || kind == "rag") return system_prompt_tokens;
  if (kind == "llmd") return prefix_tokens;
  return 0;
}

std::unique_ptr<RequestSource> make_workload(const WorkloadConfig& config, const WorkloadContext& context) {
  config.validate();
  return WorkloadRegistry::instance().create("workload.kind", config.kind, config, context);
}

}  // namespace testbed
