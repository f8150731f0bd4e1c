// fcfs: first come, first served (arrival time, then id); the newest running
// sequence is preempted first. The default, as in vLLM.
#include "engine/scheduling_policy.h"

namespace testbed {
namespace {

class FcfsPolicy : public SchedulingPolicy {
 public:
  bool before(const Sequence& a, const Sequence& b, double) const override { return arrives_before(a, b); }
  // The running list is in arrival order: the newest is last.
  size_t choose_victim(const RunningList& running, double) const override { return running.size() - 1; }
};

TESTBED_REGISTER(SchedulingPolicyRegistry, "fcfs", [] { return std::make_unique<FcfsPolicy>(); });

}  // namespace
}  // namespace testbed
