#include "engine/driver.h"

#include <chrono>
#include <thread>
#include <vector>

#include "engine/config_error.h"

namespace testbed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One step on the wall clock: schedule at `now`, execute, finish at the clock's reading.
bool wall_clock_step(Engine& engine, Clock::time_point t0, double now) {
  Batch batch = engine.schedule(now);
  if (batch.empty()) return false;
  StepResult result = engine.executor().execute(batch);
  engine.complete_step(batch, result, now, seconds_since(t0));
  return true;
}

void check_progress(Engine& engine, bool stepped) {
  if (!stepped && engine.has_unfinished())
    throw ConfigError("scheduler: no sequence could be scheduled although requests wait (configuration deadlock)");
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
    const bool stepped = wall_clock_step(engine, t0, seconds_since(t0));
    check_progress(engine, stepped);
    if (progress) progress(total - engine.scheduler().num_running() - engine.scheduler().num_waiting(), total);
  }
  return seconds_since(t0);
}

double run_realtime(Engine& engine, RequestSource& source, const ProgressFn& progress) {
  const int64_t total = source.size_hint();
  int64_t added = 0;
  std::optional<Request> pending = source.next();
  const Clock::time_point t0 = Clock::now();
  while (pending || engine.has_unfinished()) {
    double now = seconds_since(t0);
    if (!engine.has_unfinished() && pending && pending->arrival_s > now) {
      std::this_thread::sleep_for(std::chrono::duration<double>(pending->arrival_s - now));
      now = seconds_since(t0);
    }
    while (pending && pending->arrival_s <= now) {
      engine.add_request(std::move(*pending), now);
      ++added;
      pending = source.next();
    }
    if (engine.has_unfinished()) check_progress(engine, wall_clock_step(engine, t0, now));
    if (progress) {
      const int64_t in_flight = engine.scheduler().num_running() + engine.scheduler().num_waiting();
      progress(added - in_flight, total >= 0 ? total : added);
    }
  }
  return seconds_since(t0);
}

}  // namespace testbed
