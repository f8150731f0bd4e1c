// shared_prefix: a shared system prompt plus a unique user message per request
// (seed 000's case: 2,000 + 200 tokens, 200 output tokens). With
// num_prefixes > 1, each request draws one of several system prompts.
#include <vector>

#include "engine/rng.h"
#include "traces/arrivals.h"
#include "traces/workload.h"

namespace testbed {
namespace {

class SharedPrefixWorkload : public RequestSource {
 public:
  SharedPrefixWorkload(const WorkloadConfig& c, const WorkloadContext& ctx)
      : c_(c), ctx_(ctx), arrivals_(c.arrival, c.rate, c.burstiness, mix_seed(c.seed, 1)), rng_(mix_seed(c.seed, 2)) {
    Rng prefix_rng(mix_seed(c.seed, 3));
    prefixes_.resize(c.num_prefixes);
    for (auto& p : prefixes_)
      for (int i = 0; i < c.system_prompt_tokens; ++i) p.push_back(static_cast<int32_t>(prefix_rng.below(ctx.vocab_size)));
  }

  std::optional<Request> next() override {
    if (next_id_ >= c_.num_requests) return std::nullopt;
    Request r;
    r.id = next_id_++;
    r.arrival_s = arrivals_.next();
    const auto& prefix = prefixes_[c_.num_prefixes > 1 ? rng_.below(c_.num_prefixes) : 0];
    // Room for the output too: the engine keeps generated tokens in this vector.
    r.prompt.reserve(prefix.size() + c_.user_tokens + c_.output_tokens);
    r.prompt.assign(prefix.begin(), prefix.end());
    for (int i = 0; i < c_.user_tokens; ++i) r.prompt.push_back(static_cast<int32_t>(rng_.below(ctx_.vocab_size)));
    r.max_output_tokens = c_.output_tokens;
    r.sampling = ctx_.sampling;
    return r;
  }

  int64_t size_hint() const override { return c_.num_requests; }

 private:
  WorkloadConfig c_;
  WorkloadContext ctx_;
  ArrivalProcess arrivals_;
  Rng rng_;
  std::vector<std::vector<int32_t>> prefixes_;
  int64_t next_id_ = 0;
};

TESTBED_REGISTER(WorkloadRegistry, "shared_prefix", [](const WorkloadConfig& c, const WorkloadContext& ctx) {
  return std::make_unique<SharedPrefixWorkload>(c, ctx);
});

}  // namespace
}  // namespace testbed
