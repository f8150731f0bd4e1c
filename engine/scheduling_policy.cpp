#include "engine/scheduling_policy.h"

#include <algorithm>

namespace testbed {

void SchedulingPolicy::order_waiting(SequenceQueue& waiting, double now) const {
  if (!reorders_over_time() || waiting.size() < 2) return;
  std::stable_sort(waiting.begin(), waiting.end(),
                   [&](const auto& a, const auto& b) { return before(*a, *b, now); });
}

size_t SchedulingPolicy::choose_victim(const RunningList& running, double now) const {
  size_t victim = 0;
  for (size_t i = 1; i < running.size(); ++i)
    if (!before(*running[i], *running[victim], now)) victim = i;  // ties: the later one
  return victim;
}

}  // namespace testbed
