#include "engine/driver.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/common/config_error.h"

namespace testbed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One step on the wall clock: it starts at `now` and ends at the clock's
// reading when the executor returns.
StepOutcome wall_clock_step(Engine& engine, Clock::time_point t0, double now) {
  StepOutcome out = engine.step(now, [t0] { return seconds_since(t0); });
  if (out.seqs.empty())
    throw ConfigError("scheduler: no sequence could be scheduled although requests wait (configuration deadlock)");
  return out;
}

}  // namespace

double run_offline(Engine& engine, RequestSource& source, const ProgressFn& progress, int64_t* num_finished) {
  int64_t total = 0, finished = 0;
  const Clock::time_point t0 = Clock::now();
  while (auto r = source.next()) {
    r->arrival_s = 0.0;
    engine.add_request(std::move(*r), 0.0);
    ++total;
  }
  while (engine.has_unfinished()) {
    finished += wall_clock_step(engine, t0, seconds_since(t0)).num_finished;
    if (progress) progress(finished, total);
  }
  if (num_finished) *num_finished = finished;
  return seconds_since(t0);
}

double run_realtime(Engine& engine, RequestSource& source, const ProgressFn& progress, int64_t* num_finished) {
  const int64_t total = source.size_hint();
  int64_t added = 0, finished = 0;
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
      const StepOutcome out = wall_clock_step(engine, t0, now);
      finished += out.num_finished;
      if (!engine.has_unfinished()) idle_since = out.end_s;
    }
    if (progress) progress(finished, total >= 0 ? total : added);
  }
  if (num_finished) *num_finished = finished;
  return seconds_since(t0);
}

namespace {

class WallClockDriver : public Driver {
 public:
  WallClockDriver(bool offline, bool disaggregated) : offline_(offline), disaggregated_(disaggregated) {}
  DriverStats run(const EngineFactory& make_engine, RequestSource& source, const ProgressFn& progress) override {
    DriverStats stats;
    std::unique_ptr<Engine> engine = make_engine(0);
    if (disaggregated_) {
      std::unique_ptr<Engine> decode = make_engine(1);
      stats.num_instances = 2;
      stats.wall_s = run_disaggregated(*engine, *decode, source, offline_, progress, &stats.num_finished);
      return stats;
    }
    stats.wall_s = offline_ ? run_offline(*engine, source, progress, &stats.num_finished)
                            : run_realtime(*engine, source, progress, &stats.num_finished);
    return stats;
  }
  bool is_simulated() const override { return false; }

 private:
  bool offline_, disaggregated_;
};

TESTBED_REGISTER(DriverRegistry, "offline",
                 [](const DriverSetup& s) { return std::make_unique<WallClockDriver>(true, s.disaggregated); });
TESTBED_REGISTER(DriverRegistry, "realtime",
                 [](const DriverSetup& s) { return std::make_unique<WallClockDriver>(false, s.disaggregated); });

}  // namespace
}  // namespace testbed
