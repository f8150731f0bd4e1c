// SchedulingPolicy: which sequences a scheduler serves first and which it
// preempts. Every step it sees the queues: it orders the waiting queue (its
// order may change as time passes: aging, remaining work, deadline slack),
// chooses the preemption victim among the running sequences, and says whether
// new sequences may join. Policies register by name (scheduler.policy), each
// with its own keys: one file and one TESTBED_REGISTER line.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/registry.h"
#include "engine/sequence.h"

namespace testbed {

struct SchedulerView {
  int num_running = 0;
  int num_running_decoding = 0;  // running sequences past their prompt
  int num_waiting = 0;
};

using SequenceQueue = std::deque<std::unique_ptr<Sequence>>;
using RunningList = std::vector<std::unique_ptr<Sequence>>;

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  // Strict weak order at time `now`: true when `a` is admitted before `b`
  // (new and preempted sequences are inserted into the waiting queue by it).
  // Running sequences are served in arrival order whatever the policy.
  virtual bool before(const Sequence& a, const Sequence& b, double now) const = 0;
  // Called at the start of every step. The default re-sorts the queue (stably)
  // only when the order changes with time; otherwise insertion kept it sorted.
  virtual void order_waiting(SequenceQueue& waiting, double now) const;
  virtual bool reorders_over_time() const { return false; }
  // The running sequence to preempt when blocks run out (an index into
  // `running`, which is in arrival order). The default takes the one that
  // comes last under before().
  virtual size_t choose_victim(const RunningList& running, double now) const;
  // Whether a waiting sequence may be admitted this step.
  virtual bool may_admit(const SchedulerView& /*view*/) const { return true; }
};

// First come, first served: arrival time, then id.
inline bool arrives_before(const Sequence& a, const Sequence& b) {
  if (a.arrival_s() != b.arrival_s()) return a.arrival_s() < b.arrival_s();
  return a.id() < b.id();
}

using SchedulingPolicyRegistry = Registry<SchedulingPolicy>;

}  // namespace testbed
