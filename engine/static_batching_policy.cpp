// static: request-level batching, as served before Orca (OSDI '22): a batch is
// formed from the queue (FCFS), then runs until its longest request finishes;
// nothing joins while any member decodes. The baseline iteration-level
// (continuous) batching is compared against in papers/orca/.
// The batch closes as soon as a member decodes, so with chunked prefill and a
// small step budget it holds only the prompts of its first step: run it with
// chunked_prefill = false and a budget that fits a full batch of prompts (as
// experiments/orca.ini does), which is how request-level servers batch.
#include "engine/scheduling_policy.h"

namespace testbed {
namespace {

class StaticBatchingPolicy : public SchedulingPolicy {
 public:
  bool before(const Sequence& a, const Sequence& b, double) const override { return arrives_before(a, b); }
  size_t choose_victim(const RunningList& running, double) const override { return running.size() - 1; }
  // The batch may still fill up while its members are all in their prompts
  // (a token budget can split admission over a few steps); once one decodes, it is closed.
  bool may_admit(const SchedulerView& view) const override { return view.num_running_decoding == 0; }
};

TESTBED_REGISTER(SchedulingPolicyRegistry, "static", [] { return std::make_unique<StaticBatchingPolicy>(); });

}  // namespace
}  // namespace testbed
