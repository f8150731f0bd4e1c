// shared_prefix: a shared system prompt plus a unique user message per request
// (seed 000's case: 2,000 + 200 tokens, 200 output tokens). With
// num_prefixes > 1, each request draws one of several system prompts.
#include <vector>

#include "traces/generated_workload.h"

namespace testbed {
namespace {

class SharedPrefixWorkload : public GeneratedWorkload {
 public:
  SharedPrefixWorkload(const WorkloadConfig& c, const WorkloadContext& ctx) : GeneratedWorkload(c, ctx) {
    Rng prefix_rng(mix_seed(c.seed, 3));
    prefixes_.resize(c.num_prefixes);
    for (auto& p : prefixes_)
      for (int i = 0; i < c.system_prompt_tokens; ++i) p.push_back(static_cast<int32_t>(prefix_rng.below(ctx.vocab_size)));
  }

  void fill(Request& r) override {
    const auto& prefix = prefixes_[c_.num_prefixes > 1 ? rng_.below(c_.num_prefixes) : 0];
    // Room for the output too: the engine keeps generated tokens in this vector.
    r.prompt.reserve(prefix.size() + c_.user_tokens + c_.output_tokens);
    r.prompt.assign(prefix.begin(), prefix.end());
    for (int i = 0; i < c_.user_tokens; ++i) r.prompt.push_back(static_cast<int32_t>(rng_.below(ctx_.vocab_size)));
  }

 private:
  std::vector<std::vector<int32_t>> prefixes_;
};

TESTBED_REGISTER(WorkloadRegistry, "shared_prefix", [](const WorkloadConfig& c, const WorkloadContext& ctx) {
  return std::make_unique<SharedPrefixWorkload>(c, ctx);
});

}  // namespace
}  // namespace testbed
