#include "sim/simulated_driver.h"

#include <optional>

#include "engine/config_error.h"

namespace testbed {
namespace {

class SingleEngineSimulation {
 public:
  SingleEngineSimulation(Engine& engine, RequestSource& source, const ProgressFn& progress)
      : engine_(engine), source_(source), progress_(progress), total_(source.size_hint()) {}

  SimulationStats run() {
    pull_next_arrival();
    loop_.run();
    SimulationStats stats;
    stats.simulated_s = loop_.now();
    stats.num_events = loop_.num_processed();
    return stats;
  }

 private:
  void pull_next_arrival() {
    std::optional<Request> r = source_.next();
    if (!r) return;
    if (r->arrival_s < last_arrival_)
      throw ConfigError("trace: request " + std::to_string(r->id) + " arrives before the previous one");
    last_arrival_ = r->arrival_s;
    auto shared = std::make_shared<Request>(std::move(*r));
    loop_.at(shared->arrival_s, kRankArrival, [this, shared](double now) {
      engine_.add_request(std::move(*shared), now);
      ++added_;
      kick(now);
      pull_next_arrival();
    });
  }

  // Starts a step at `now` (after every arrival at `now`) unless one is under way.
  void kick(double now) {
    if (busy_ || start_pending_) return;
    start_pending_ = true;
    loop_.at(now, kRankStepStart, [this](double t) {
      start_pending_ = false;
      start_step(t);
    });
  }

  void start_step(double now) {
    Batch batch = engine_.schedule(now);
    if (batch.empty()) {
      if (engine_.has_unfinished())
        throw ConfigError("scheduler: no sequence could be scheduled although requests wait (configuration deadlock)");
      return;
    }
    busy_ = true;
    StepResult result = engine_.executor().execute(batch);
    auto step = std::make_shared<std::pair<Batch, StepResult>>(std::move(batch), std::move(result));
    loop_.at(now + step->second.duration_s, kRankStepEnd, [this, step, now](double end) {
      engine_.complete_step(step->first, step->second, now, end);
      busy_ = false;
      if (progress_) {
        const int64_t in_flight = engine_.scheduler().num_running() + engine_.scheduler().num_waiting();
        progress_(added_ - in_flight, total_ >= 0 ? total_ : added_);
      }
      if (engine_.has_unfinished()) start_step(end);
    });
  }

  Engine& engine_;
  RequestSource& source_;
  const ProgressFn& progress_;
  int64_t total_;
  EventLoop loop_;
  bool busy_ = false, start_pending_ = false;
  int64_t added_ = 0;
  double last_arrival_ = 0.0;
};

}  // namespace

SimulationStats run_simulated(Engine& engine, RequestSource& source, const ProgressFn& progress) {
  return SingleEngineSimulation(engine, source, progress).run();
}

}  // namespace testbed
