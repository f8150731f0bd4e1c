// priority: the most urgent request first (Request::priority, lower is more
// urgent, as vLLM's priority scheduling; from workload.num_priorities or a
// trace's "priority" field), ties first come first served. With aging
// (scheduler.priority_aging_s > 0) every aging_s a request has waited since
// it arrived raises it one level, down to level 0, so a low-priority request
// is not starved by a stream of urgent ones. The preemption victim is the
// least urgent running sequence (the newest among equals).
#include <cmath>

#include "engine/common/option_table.h"
#include "engine/scheduling_policy.h"

namespace testbed {
namespace {

struct PriorityParams : ParamsOf<PriorityParams> {
  double aging_s = 0.0;
  void bind(OptionTable& t) override {
    t.add("scheduler.priority_aging_s", &aging_s,
          "priority policy: waiting this long raises a request one priority level (0: no aging)");
  }
  void validate() const override { require(aging_s >= 0, "scheduler.priority_aging_s", "must be >= 0"); }
};

class PriorityPolicy : public SchedulingPolicy {
 public:
  explicit PriorityPolicy(const PriorityParams& p) : aging_s_(p.aging_s) {}

  bool before(const Sequence& a, const Sequence& b, double now) const override {
    const double pa = effective(a, now), pb = effective(b, now);
    if (pa != pb) return pa < pb;
    return arrives_before(a, b);
  }
  bool reorders_over_time() const override { return aging_s_ > 0; }

 private:
  // The request's level, raised one step per aging_s waited, never above level 0.
  double effective(const Sequence& s, double now) const {
    if (aging_s_ <= 0 || s.priority() <= 0) return s.priority();
    const double levels = std::floor(std::max(0.0, now - s.arrival_s()) / aging_s_);
    return std::max(0.0, s.priority() - levels);
  }
  double aging_s_;
};

TESTBED_REGISTER(SchedulingPolicyRegistry, "priority",
                 [](const PriorityParams& p) { return std::make_unique<PriorityPolicy>(p); });

}  // namespace
}  // namespace testbed
