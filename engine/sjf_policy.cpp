// sjf: shortest job first by remaining prompt: the waiting sequence with the
// fewest tokens left to compute (its prompt, or prompt and output when it
// recomputes after a preemption) is admitted first, ties first come first
// served. It cuts mean TTFT on mixed prompt lengths at the price of long
// prompts' tails. The preemption victim is the running sequence with the
// most tokens left to compute (the newest among equals).
#include "engine/scheduling_policy.h"

namespace testbed {
namespace {

int remaining_tokens(const Sequence& s) { return s.num_tokens() - s.num_computed_tokens; }

class SjfPolicy : public SchedulingPolicy {
 public:
  bool before(const Sequence& a, const Sequence& b, double) const override {
    const int ra = remaining_tokens(a), rb = remaining_tokens(b);
    if (ra != rb) return ra < rb;
    return arrives_before(a, b);
  }
};

TESTBED_REGISTER(SchedulingPolicyRegistry, "sjf", [] { return std::make_unique<SjfPolicy>(); });

}  // namespace
}  // namespace testbed
