#include "engine/driver.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/config_error.h"

namespace testbed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One step on the wall clock: schedule at `now`, execute, finish at the clock's
// reading, which it returns.
double wall_clock_step(Engine& engine, Clock::time_point t0, double now) {
  Batch batch = engine.schedule(now);
  if (batch.empty())
    throw ConfigError("scheduler: no sequence could be scheduled although requests wait (configuration deadlock)");
  StepResult result = engine.executor().execute(batch);
  const double end = seconds_since(t0);
  engine.complete_step(batch, result, now, end);
  return end;
}

}  // namespace

double run_offline(Engine& engine, RequestSource& source, const ProgressFn& progress) {
  int64_t total = 0;
  const Clock::time_point t0 = Clock::now();
  while (auto r = source.next()) {
    r->arrival_s = 0.0;
    engine.add_request(std::move(*r), 0.0);
    ++total;
  }
  while (engine.has_unfinished()) {
    wall_clock_step(engine, t0, seconds_since(t0));
    if (progress) progress(total - engine.scheduler().num_running() - engine.scheduler().num_waiting(), total);
  }
  return seconds_since(t0);
}

double run_realtime(Engine& engine, RequestSource& source, const ProgressFn& progress) {
  const int64_t total = source.size_hint();
  int64_t added = 0;
  std::optional<Request> pending = source.next();
  const Clock::time_point t0 = Clock::now();
  double idle_since = 0.0;  // end of the last step that left the engine without work
  while (pending || engine.has_unfinished()) {
    double now = seconds_since(t0);
    if (!engine.has_unfinished() && pending) {
      // Idle until the next arrival. The step starts at the arrival instant, not
      // at the (slightly later) wake-up: the same convention as the simulator,
      // so a simulation of the same trace sees the same batches at the same times.
      if (pending->arrival_s > now) std::this_thread::sleep_for(std::chrono::duration<double>(pending->arrival_s - now));
      now = std::max(pending->arrival_s, idle_since);
    }
    while (pending && pending->arrival_s <= now) {
      engine.add_request(std::move(*pending), now);
      ++added;
      pending = source.next();
    }
    if (engine.has_unfinished()) {
      const double end = wall_clock_step(engine, t0, now);
      if (!engine.has_unfinished()) idle_since = end;
    }
    if (progress) {
      const int64_t in_flight = engine.scheduler().num_running() + engine.scheduler().num_waiting();
      progress(added - in_flight, total >= 0 ? total : added);
    }
  }
  return seconds_since(t0);
}

}  // namespace testbed
