// llmd: the workload of llm-d's precise prefix-cache-aware routing benchmark
// (llm-d blog "KV-Cache Wins You Can See", appendix A.2; benchmark report in
// llm-d-kv-cache-manager, benchmarking/73-capacity): 150 enterprise customers
// (groups), each with its own 6,000-token context as a shared prefix, 5 users
// per customer, each request a unique 1,200-token question, Poisson arrivals.
// Here: workload.num_customers (150) x workload.users_per_customer (5),
// workload.prefix_tokens (6000), workload.query_tokens (1200). Each request
// picks a customer and a user uniformly with the seeded Rng.
//
// Users: the benchmark gives users no context of their own, so by default
// (workload.user_context_tokens = 0) the user only sets Request.session_id
// (customer * users_per_customer + user), which is what session-affinity
// routers key on; the blog contrasts exactly that (750 sessions) with prefix
// routing. A positive user_context_tokens adds a per-user span after the
// customer prefix (a user's own history), for a two-level sharing hierarchy.
// llm-d's reports drive this shape with inference-perf's shared_prefix data
// (e.g. benchmarking/37-capacity), which replays a fixed set of num_groups x
// num_prompts_per_group prompts, so a user's whole prompt repeats;
// user_context_tokens = question length with query_tokens = 0 reproduces that
// (the per-user span is then the user's fixed question).
// Prefixes are generated on demand from (seed, customer), never stored.
#include <vector>

#include "traces/generated_workload.h"
#include "traces/random_tokens.h"

namespace testbed {
namespace {

class LlmdWorkload : public GeneratedWorkload {
 public:
  LlmdWorkload(const WorkloadConfig& c, const WorkloadContext& ctx)
      : GeneratedWorkload(c, ctx),
        prefix_seed_(mix_seed(c.seed, 6)),
        user_seed_(mix_seed(c.seed, 7)) {}

  void fill(Request& r) override {
    const int64_t customer = static_cast<int64_t>(rng_.below(static_cast<uint64_t>(c_.num_customers)));
    const int64_t user = static_cast<int64_t>(rng_.below(static_cast<uint64_t>(c_.users_per_customer)));
    r.session_id = customer * c_.users_per_customer + user;
    r.prompt.reserve(static_cast<size_t>(c_.prefix_tokens) + c_.user_context_tokens + c_.query_tokens +
                     c_.output_tokens);
    append_span_tokens(r.prompt, prefix_seed_, static_cast<uint64_t>(customer), c_.prefix_tokens, ctx_.vocab_size);
    append_span_tokens(r.prompt, user_seed_, static_cast<uint64_t>(r.session_id), c_.user_context_tokens,
                       ctx_.vocab_size);
    append_random_tokens(r.prompt, rng_, c_.query_tokens, ctx_.vocab_size);
  }

 private:
  uint64_t prefix_seed_, user_seed_;
};

TESTBED_REGISTER(WorkloadRegistry, "llmd", [](const WorkloadConfig& c, const WorkloadContext& ctx) {
  return std::make_unique<LlmdWorkload>(c, ctx);
});

}  // namespace
}  // namespace testbed
