#include "engine/driver.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <thread>
#include <vector>

#include "engine/common/config_error.h"
#include "engine/ingress.h"

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

namespace {

// run_offline with an ingress: every request arrived at t = 0 and waits at the
// ingress in order; it is looked up when the engine has room for it (fewer
// than max_num_seqs waiting there, so every step can still fill its batch).
double run_offline_behind(Ingress& ingress, Engine& engine, RequestSource& source, const ProgressFn& progress,
                          int64_t* num_finished) {
  std::deque<Request> queue;
  while (auto r = source.next()) {
    r->arrival_s = 0.0;
    queue.push_back(std::move(*r));
  }
  const int64_t total = static_cast<int64_t>(queue.size());
  const int window = engine.scheduler().config().max_num_seqs;
  int64_t finished = 0;
  const Clock::time_point t0 = Clock::now();
  while (!queue.empty() || engine.has_unfinished()) {
    const double now = seconds_since(t0);
    while (!queue.empty() && engine.scheduler().num_waiting() < window) {
      Request r = std::move(queue.front());
      queue.pop_front();
      if (ingress.admit(r, now)) {
        const double at = r.arrival_s;
        engine.add_request(std::move(r), at);
      } else {
        ++finished;
      }
    }
    if (engine.has_unfinished()) {
      const StepOutcome out = wall_clock_step(engine, t0, std::max(seconds_since(t0), ingress.ready_s()));
      ingress.on_step(out);
      finished += out.num_finished;
    }
    if (progress) progress(finished, total);
  }
  if (num_finished) *num_finished = finished;
  return seconds_since(t0);
}

}  // namespace

double run_offline(Engine& engine, RequestSource& source, const ProgressFn& progress, int64_t* num_finished,
                   Ingress* ingress) {
  if (ingress) return run_offline_behind(*ingress, engine, source, progress, num_finished);
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

double run_realtime(Engine& engine, RequestSource& source, const ProgressFn& progress, int64_t* num_finished,
                    Ingress* ingress) {
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
      Request r = std::move(*pending);
      pending = source.next();
      ++added;
      if (!ingress) {
        engine.add_request(std::move(r), now);
      } else if (ingress->admit(r, now)) {
        const double at = r.arrival_s;  // its lookup's end
        engine.add_request(std::move(r), at);
      } else {
        ++finished;  // answered by the cache
      }
    }
    // The lookups ran on this thread: the step starts after them.
    if (ingress) now = std::max(now, ingress->ready_s());
    if (engine.has_unfinished()) {
      const StepOutcome out = wall_clock_step(engine, t0, now);
      if (ingress) ingress->on_step(out);
      finished += out.num_finished;
      if (!engine.has_unfinished()) idle_since = out.end_s;
    } else if (ingress) {
      idle_since = std::max(idle_since, ingress->ready_s());
    }
    if (progress) progress(finished, total >= 0 ? total : added);
  }
  if (num_finished) *num_finished = finished;
  return seconds_since(t0);
}

namespace {

class WallClockDriver : public Driver {
 public:
  WallClockDriver(bool offline, const DriverSetup& setup) : offline_(offline), setup_(setup) {}
  DriverStats run(const EngineFactory& make_engine, RequestSource& source, const ProgressFn& progress) override {
    DriverStats stats;
    std::unique_ptr<Engine> engine = make_engine(0);
    if (setup_.disaggregated) {
      if (setup_.semantic_cache.enabled)
        throw ConfigError("ingress.semantic_cache: on the wall clock the ingress cache fronts one engine, not a "
                          "prefill/decode pair (driver.mode = simulated runs it in front of pools)");
      std::unique_ptr<Engine> decode = make_engine(1);
      stats.num_instances = 2;
      stats.wall_s = run_disaggregated(*engine, *decode, source, offline_, progress, &stats.num_finished);
      return stats;
    }
    std::unique_ptr<Ingress> ingress;
    if (setup_.semantic_cache.enabled)
      ingress = std::make_unique<Ingress>(setup_.semantic_cache, engine->executor(), setup_.sink);
    stats.wall_s = offline_ ? run_offline(*engine, source, progress, &stats.num_finished, ingress.get())
                            : run_realtime(*engine, source, progress, &stats.num_finished, ingress.get());
    if (ingress) stats.ingress_s = ingress->lookup_seconds();
    return stats;
  }
  bool is_simulated() const override { return false; }

 private:
  bool offline_;
  DriverSetup setup_;
};

TESTBED_REGISTER(DriverRegistry, "offline",
                 [](const DriverSetup& s) { return std::make_unique<WallClockDriver>(true, s); });
TESTBED_REGISTER(DriverRegistry, "realtime",
                 [](const DriverSetup& s) { return std::make_unique<WallClockDriver>(false, s); });

}  // namespace
}  // namespace testbed
