#include "traces/workload.h"

#include "engine/config_error.h"
#include "experiments/cli/option_table.h"

namespace testbed {

void WorkloadConfig::bind(OptionTable& t) {
  t.add("workload.kind", &kind, "request generator or trace reader");
  t.add("workload.num_requests", &num_requests, "requests to generate");
  t.add("workload.rate", &rate, "arrivals per second (0: all at t=0)");
  t.add("workload.arrival", &arrival, "poisson | gamma | constant");
  t.add("workload.burstiness", &burstiness, "gamma shape (1 = Poisson, < 1 burstier)");
  t.add("workload.system_prompt_tokens", &system_prompt_tokens, "shared system prompt length");
  t.add("workload.user_tokens", &user_tokens, "unique user message length");
  t.add("workload.output_tokens", &output_tokens, "output tokens per request");
  t.add("workload.num_prefixes", &num_prefixes, "distinct system prompts");
  t.add("workload.seed", &seed, "seed of lengths, contents and arrivals");
}

void WorkloadConfig::validate() const {
  require(WorkloadRegistry::instance().contains(kind), "workload.kind",
          "unknown workload '" + kind + "' (known: " + WorkloadRegistry::instance().names_joined() + ")");
  require(num_requests > 0, "workload.num_requests", "must be positive");
  require(rate >= 0, "workload.rate", "must be >= 0 (0 = all at t=0)");
  require(arrival == "poisson" || arrival == "gamma" || arrival == "constant", "workload.arrival",
          "unknown arrival process '" + arrival + "' (known: constant, gamma, poisson)");
  require(burstiness > 0, "workload.burstiness", "must be positive");
  require(system_prompt_tokens >= 0, "workload.system_prompt_tokens", "must be >= 0");
  require(user_tokens >= 0, "workload.user_tokens", "must be >= 0");
  require(system_prompt_tokens + user_tokens > 0, "workload.user_tokens", "a prompt needs at least one token");
  require(output_tokens > 0, "workload.output_tokens", "must be positive");
  require(num_prefixes > 0, "workload.num_prefixes", "must be positive");
}

int WorkloadConfig::max_sequence_tokens() const {
  if (kind == "shared_prefix") return system_prompt_tokens + user_tokens + output_tokens;
  return 0;
}

std::unique_ptr<RequestSource> make_workload(const WorkloadConfig& config, const WorkloadContext& context) {
  config.validate();
  return WorkloadRegistry::instance().create("workload.kind", config.kind, config, context);
}

}  // namespace testbed
