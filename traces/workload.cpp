// WorkloadConfig: the shared keys, validation, and the factory that picks a source by workload.kind.
#include "traces/workload.h"

#include <stdexcept>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/common/rng.h"

namespace testbed {

void WorkloadConfig::bind(OptionTable& t) {
  kind.bind(t);
  t.add("workload.num_requests", &num_requests, "requests to generate (generators)");
  t.add("workload.rate", &rate, "arrivals per second (0: all at t=0)");
  t.add("workload.arrival", &arrival, "poisson | gamma | constant");
  t.add("workload.burstiness", &burstiness, "gamma shape (1 = Poisson, < 1 burstier)");
  t.add("workload.output_tokens", &output_tokens, "output tokens per request");
  t.add("workload.num_priorities", &num_priorities, "priority classes drawn uniformly per request (1: all priority 0)");
  t.add("workload.seed", &seed, "seed of lengths, contents and arrivals");
}

const WorkloadParams& WorkloadConfig::params() const {
  const auto* p = dynamic_cast<const WorkloadParams*>(&kind.chosen_params());
  if (!p) throw std::logic_error("workload '" + kind.name + "' does not declare WorkloadParams");
  return *p;
}

void WorkloadConfig::validate() const {
  kind.validate();
  require(num_requests > 0, "workload.num_requests", "must be positive");
  require(rate >= 0, "workload.rate", "must be >= 0 (0 = all at t=0)");
  require(arrival == "poisson" || arrival == "gamma" || arrival == "constant", "workload.arrival",
          "unknown arrival process '" + arrival + "' (known: constant, gamma, poisson)");
  require(burstiness > 0, "workload.burstiness", "must be positive");
  require(output_tokens > 0, "workload.output_tokens", "must be positive");
  require(num_priorities >= 1, "workload.num_priorities", "must be >= 1");
  require(params().max_sequence_tokens(*this) < (int64_t{1} << 30), "workload.kind",
          "'" + kind.name + "' sequences would exceed 2^30 tokens; check the length keys");
}

int WorkloadConfig::max_sequence_tokens() const { return static_cast<int>(params().max_sequence_tokens(*this)); }
int WorkloadConfig::shared_prefix_tokens() const { return params().shared_prefix_tokens(); }

PriorityDraw::PriorityDraw(const WorkloadConfig& c) : num_priorities_(c.num_priorities), state_(mix_seed(c.seed, 8)) {}

int PriorityDraw::next() {
  if (num_priorities_ <= 1) return 0;
  const uint64_t x = splitmix64(state_);
  return static_cast<int>((static_cast<unsigned __int128>(x) * static_cast<uint64_t>(num_priorities_)) >> 64);
}

std::unique_ptr<RequestSource> make_workload(const WorkloadConfig& config, const WorkloadContext& context) {
  config.validate();
  return config.kind.create(config, context);
}

}  // namespace testbed
