// WorkloadConfig: the shared keys, validation, and the factory that picks a source by workload.kind.
#include "traces/workload.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/common/rng.h"

namespace testbed {

void WorkloadConfig::bind(OptionTable& t) {
  kind.bind(t);
  t.add("workload.num_requests", &num_requests, "requests to generate (generators)");
  t.add("workload.rate", &rate, "arrivals per second (0: all at t=0)");
  t.add("workload.arrival", &arrival, "poisson | gamma | constant | trace (mix: workload.profile_trace's gaps)");
  t.add("workload.burstiness", &burstiness, "gamma shape (1 = Poisson, < 1 burstier)");
  t.add("workload.output_tokens", &output_tokens, "output tokens per request");
  t.add("workload.num_priorities", &num_priorities, "priority classes drawn uniformly per request (1: all priority 0)");
  t.add("workload.seed", &seed, "seed of lengths, contents and arrivals");
  t.add("workload.read_ahead", &read_ahead,
        "requests generated and hashed ahead of the run, by a thread of its own or, with fleet.threads > 1, by the fleet's waiting workers (0: none; same requests either way)");
  t.add("workload.cancel_fraction", &cancel_fraction, "share of requests whose client disconnects before the end");
  t.add("workload.cancel_after", &cancel_after, "time | tokens: a disconnect after a time or after output tokens");
  t.add("workload.cancel_mean", &cancel_mean, "mean of the exponential disconnect time (s) or token count");
  intents.bind(t);
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
  require(arrival == "poisson" || arrival == "gamma" || arrival == "constant" || arrival == "trace", "workload.arrival",
          "unknown arrival process '" + arrival + "' (known: constant, gamma, poisson, trace)");
  require(arrival != "trace" || kind.name == "mix", "workload.arrival",
          "trace replays workload.profile_trace's gaps, which only workload.kind = mix reads (workload.kind = " +
              kind.name + "; a replayed trace keeps its own timestamps with trace.arrivals = trace)");
  require(burstiness > 0, "workload.burstiness", "must be positive");
  require(output_tokens > 0, "workload.output_tokens", "must be positive");
  require(num_priorities >= 1, "workload.num_priorities", "must be >= 1");
  require(read_ahead >= 0 && read_ahead <= 1000000, "workload.read_ahead", "must be in [0, 1000000] (0: none)");
  require(cancel_fraction >= 0 && cancel_fraction <= 1, "workload.cancel_fraction", "must be in [0, 1]");
  require(cancel_after == "time" || cancel_after == "tokens", "workload.cancel_after",
          "must be time or tokens, got '" + cancel_after + "'");
  require(cancel_mean > 0 && std::isfinite(cancel_mean), "workload.cancel_mean", "must be positive and finite");
  intents.validate();
  require(!(intents.is_overlay() && params().sets_intents()), "workload.intents",
          "overlay is for kinds without intents; workload.kind = " + kind.name + " sets its own (use none)");
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

CancellingSource::CancellingSource(std::unique_ptr<RequestSource> inner, const WorkloadConfig& c)
    : inner_(std::move(inner)),
      fraction_(c.cancel_fraction),
      mean_(c.cancel_mean),
      by_tokens_(c.cancel_after == "tokens"),
      state_(mix_seed(c.seed, 9)) {}

std::optional<Request> CancellingSource::next() {
  std::optional<Request> r = inner_->next();
  if (!r) return r;
  // Two draws per request, whatever they decide, so request k's fate depends on k alone.
  Rng rng(splitmix64(state_));
  const bool cancels = rng.uniform() < fraction_;
  const double after = rng.exponential(1.0 / mean_);
  if (cancels) {
    if (by_tokens_)
      r->cancel_after_tokens = std::max(1, static_cast<int>(std::min(std::ceil(after), 1e9)));
    else
      r->cancel_after_s = after;
  }
  return r;
}

std::unique_ptr<RequestSource> make_workload(const WorkloadConfig& config, const WorkloadContext& context) {
  config.validate();
  std::unique_ptr<RequestSource> source = config.kind.create(config, context);
  if (config.intents.is_overlay())
    source = std::make_unique<IntentOverlay>(std::move(source), config.intents, config.seed);
  if (config.cancel_fraction > 0) source = std::make_unique<CancellingSource>(std::move(source), config);
  return source;
}

}  // namespace testbed
