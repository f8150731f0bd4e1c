// fcfs: first come, first served (arrival time, then id); the newest running
// sequence is preempted first. The default, as in vLLM.
#include "engine/scheduling_policy.h"

namespace testbed {
namespace {

class FcfsPolicy : public SchedulingPolicy {
 public:
  bool before(const Sequence& a, const Sequence& b) const override {
    if (a.arrival_s() != b.arrival_s()) return a.arrival_s() < b.arrival_s();
    return a.id() < b.id();
  }
};

TESTBED_REGISTER(SchedulingPolicyRegistry, "fcfs", [] { return std::make_unique<FcfsPolicy>(); });

}  // namespace
}  // namespace testbed
