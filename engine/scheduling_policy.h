// SchedulingPolicy: the order in which sequences are served (and, reversed, the
// order in which running ones are preempted), and whether new sequences may join
// the running batch. Policies register by name (scheduler.policy).
#pragma once

#include <memory>
#include <string>

#include "engine/registry.h"
#include "engine/sequence.h"

namespace testbed {

struct SchedulerView {
  int num_running = 0;
  int num_running_decoding = 0;  // running sequences past their prompt
  int num_waiting = 0;
};

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  // Strict weak order: true when `a` is served before `b`.
  virtual bool before(const Sequence& a, const Sequence& b) const = 0;
  // Whether a waiting sequence may be admitted this step.
  virtual bool may_admit(const SchedulerView& /*view*/) const { return true; }
};

using SchedulingPolicyRegistry = Registry<SchedulingPolicy>;

}  // namespace testbed
