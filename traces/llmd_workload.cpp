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

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "traces/generated_workload.h"
#include "traces/random_tokens.h"

namespace testbed {
namespace {

struct LlmdParams : ParamsOf<LlmdParams, WorkloadParams> {
  int num_customers = 150;
  int users_per_customer = 5;
  int prefix_tokens = 6000;     // each customer's shared context
  int user_context_tokens = 0;  // optional per-user context after the customer prefix
  int query_tokens = 1200;      // unique question of each request
  void bind(OptionTable& t) override {
    t.add("workload.num_customers", &num_customers, "llmd: customers (groups), each with its own prefix");
    t.add("workload.users_per_customer", &users_per_customer, "llmd: users per customer");
    t.add("workload.prefix_tokens", &prefix_tokens, "llmd: shared context of each customer");
    t.add("workload.user_context_tokens", &user_context_tokens, "llmd: per-user context after the prefix");
    t.add("workload.query_tokens", &query_tokens, "llmd: unique query of each request");
  }
  void validate() const override {
    require(num_customers > 0, "workload.num_customers", "must be positive");
    require(users_per_customer > 0, "workload.users_per_customer", "must be positive");
    require(prefix_tokens >= 0, "workload.prefix_tokens", "must be >= 0");
    require(user_context_tokens >= 0, "workload.user_context_tokens", "must be >= 0");
    require(query_tokens >= 0, "workload.query_tokens", "must be >= 0");
    require(int64_t{prefix_tokens} + user_context_tokens + query_tokens > 0, "workload.query_tokens",
            "an llmd prompt needs at least one token");
  }
  int64_t max_sequence_tokens(const WorkloadConfig& c) const override {
    return int64_t{prefix_tokens} + user_context_tokens + query_tokens + c.output_tokens;
  }
  int shared_prefix_tokens() const override { return prefix_tokens; }
};

class LlmdWorkload : public GeneratedWorkload {
 public:
  LlmdWorkload(const LlmdParams& p, const WorkloadConfig& c, const WorkloadContext& ctx)
      : GeneratedWorkload(c, ctx), p_(p), prefix_seed_(mix_seed(c.seed, 6)), user_seed_(mix_seed(c.seed, 7)) {}

  void fill(Request& r) override {
    const int64_t customer = static_cast<int64_t>(rng_.below(static_cast<uint64_t>(p_.num_customers)));
    const int64_t user = static_cast<int64_t>(rng_.below(static_cast<uint64_t>(p_.users_per_customer)));
    r.session_id = customer * p_.users_per_customer + user;
    r.prompt.reserve(static_cast<size_t>(p_.prefix_tokens) + p_.user_context_tokens + p_.query_tokens +
                     c_.output_tokens);
    append_span_tokens(r.prompt, prefix_seed_, static_cast<uint64_t>(customer), p_.prefix_tokens, ctx_.vocab_size);
    append_span_tokens(r.prompt, user_seed_, static_cast<uint64_t>(r.session_id), p_.user_context_tokens,
                       ctx_.vocab_size);
    append_random_tokens(r.prompt, rng_, p_.query_tokens, ctx_.vocab_size);
  }

 private:
  LlmdParams p_;
  uint64_t prefix_seed_, user_seed_;
};

TESTBED_REGISTER(WorkloadRegistry, "llmd", [](const LlmdParams& p, const WorkloadConfig& c, const WorkloadContext& ctx) {
  return std::make_unique<LlmdWorkload>(p, c, ctx);
});

}  // namespace
}  // namespace testbed
