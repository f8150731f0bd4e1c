// shared_prefix: a shared system prompt plus a unique user message per request
// (seed 000's case: 2,000 + 200 tokens, 200 output tokens). With
// num_prefixes > 1, each request draws one of several system prompts.
#include <vector>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "traces/generated_workload.h"
#include "traces/prompt_hashes.h"
#include "traces/random_tokens.h"

namespace testbed {
namespace {

struct SharedPrefixParams : ParamsOf<SharedPrefixParams, WorkloadParams> {
  PromptShape shape;
  int num_prefixes = 1;  // distinct system prompts, drawn uniformly
  void bind(OptionTable& t) override {
    shape.bind(t);
    t.add("workload.num_prefixes", &num_prefixes, "shared_prefix: distinct system prompts");
  }
  void validate() const override {
    shape.validate();
    require(num_prefixes > 0, "workload.num_prefixes", "must be positive");
  }
  int64_t max_sequence_tokens(const WorkloadConfig& c) const override {
    return int64_t{shape.system_prompt_tokens} + shape.user_tokens + c.output_tokens;
  }
  int shared_prefix_tokens() const override { return shape.system_prompt_tokens; }
};

class SharedPrefixWorkload : public GeneratedWorkload {
 public:
  SharedPrefixWorkload(const SharedPrefixParams& p, const WorkloadConfig& c, const WorkloadContext& ctx)
      : GeneratedWorkload(c, ctx), p_(p) {
    Rng prefix_rng(mix_seed(c.seed, 3));
    prefixes_.resize(p.num_prefixes);
    for (auto& prefix : prefixes_) append_random_tokens(prefix, prefix_rng, p.shape.system_prompt_tokens, ctx.vocab_size);
  }

  void fill(Request& r) override {
    const size_t index = p_.num_prefixes > 1 ? rng_.below(p_.num_prefixes) : 0;
    const auto& prefix = prefixes_[index];
    // Room for the output too: the engine keeps generated tokens in this vector.
    r.prompt.reserve(prefix.size() + p_.shape.user_tokens + c_.output_tokens);
    r.prompt.assign(prefix.begin(), prefix.end());
    append_random_tokens(r.prompt, rng_, p_.shape.user_tokens, ctx_.vocab_size);
    if (hashes_.enabled()) {
      const std::vector<uint64_t>& leading = hashes_.part(index, prefix);
      hashes_.finish(r, leading, leading.size());
    }
  }

 private:
  SharedPrefixParams p_;
  std::vector<std::vector<int32_t>> prefixes_;
  PromptHashes hashes_{ctx_.hash_block_size};  // each system prompt's blocks hashed once
};

TESTBED_REGISTER(WorkloadRegistry, "shared_prefix",
                 [](const SharedPrefixParams& p, const WorkloadConfig& c, const WorkloadContext& ctx) {
                   return std::make_unique<SharedPrefixWorkload>(p, c, ctx);
                 });

}  // namespace
}  // namespace testbed
