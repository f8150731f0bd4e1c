// Autoscaling (sim/autoscaler.h): the policies' rules; a pool reacts to a step
// in load within its window + interval + start-up delay and scales back after
// the cooldown; it never leaves its bounds; a replica drains before it goes
// off (no request routed to it once draining, all of its own finished); the
// paid instance-seconds follow the replicas; bad keys name the key.
#include <catch2/catch.hpp>

#include <map>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/metrics/fleet_metrics.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "sim/autoscaler.h"
#include "sim/cost_model.h"
#include "sim/fleet.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"
#include "support/sim_harness.h"

using namespace testbed;

namespace {

// Poisson arrivals at `low` per second until `step_s`, `high` until `end_s`, then `low` again until `tail_s`.
class StepLoad : public RequestSource {
 public:
  StepLoad(double low, double high, double step_s, double end_s, double tail_s)
      : low_(low), high_(high), step_(step_s), end_(end_s), tail_(tail_s) {}
  std::optional<Request> next() override {
    const double rate = t_ >= step_ && t_ < end_ ? high_ : low_;
    t_ += rng_.exponential(rate);
    if (t_ >= tail_) return std::nullopt;
    Request r;
    r.id = id_++;
    r.arrival_s = t_;
    r.prompt = test::random_tokens(rng_, 200, 1000);
    r.max_output_tokens = 50;
    return r;
  }

 private:
  double low_, high_, step_, end_, tail_, t_ = 0;
  int64_t id_ = 0;
  Rng rng_{17};
};

struct ScaleRun {
  std::unique_ptr<RunRecorder> rec = std::make_unique<RunRecorder>(false, false, true);
  std::vector<std::unique_ptr<Engine>> engines;
  SimulationStats stats;
};

AutoscaleConfig scaling(const std::vector<std::pair<std::string, std::string>>& keys) {
  AutoscaleConfig a;
  set_options(a, keys);
  return a;
}

// Up to `size` replicas of a micro model whose step costs 2e-4 s per prefill token and 2e-3 s per decode step.
ScaleRun run(const AutoscaleConfig& a, RequestSource& source, int size = 6, double startup_s = 20.0) {
  const ModelConfig model = test::micro_model(1000);
  std::shared_ptr<const CostModel> cost = test::linear_cost(model, 2e-4, 1e-4, 2e-3);
  EngineConfig cfg;
  cfg.max_model_len = 1024;
  cfg.scheduler.max_num_seqs = 8;  // a replica saturates: a queue builds under load
  ScaleRun out;
  std::vector<FleetPool> pools(1);
  for (int i = 0; i < size; ++i) {
    out.engines.push_back(std::make_unique<Engine>(i, cfg, 400, std::make_unique<SimExecutor>(cost, 1000), out.rec.get()));
    pools[0].engines.push_back(out.engines.back().get());
  }
  RouterSetup rs;
  rs.num_instances = size;
  rs.blocks_per_instance = 400;
  pools[0].router = make_router(router_choice("least_loaded"), rs);
  pools[0].autoscale = a;
  pools[0].startup_s = startup_s;
  FleetOptions opt;
  opt.sink = out.rec.get();
  opt.log_events = true;
  Fleet fleet(std::move(pools), opt);
  out.stats = fleet.run(source, nullptr);
  return out;
}

}  // namespace

TEST_CASE("the threshold and target policies follow their rules", "[autoscale]") {
  const AutoscaleConfig th = scaling({{"autoscale.policy", "threshold"}, {"autoscale.up_above", "4"},
                                      {"autoscale.down_below", "1"}, {"autoscale.step", "2"}});
  const auto t = th.policy.create(AutoscalePolicySetup{});
  CHECK(t->desired(3, 5.0) == 5);
  CHECK(t->desired(3, 4.0) == 3);
  CHECK(t->desired(3, 2.0) == 3);
  CHECK(t->desired(3, 0.5) == 1);
  const AutoscaleConfig tg = scaling({{"autoscale.policy", "target"}, {"autoscale.target", "2"}});
  const auto g = tg.policy.create(AutoscalePolicySetup{});
  CHECK(g->desired(4, 2.1) == 4);  // within 10 %
  CHECK(g->desired(4, 3.0) == 6);  // ceil(4 x 1.5)
  CHECK(g->desired(4, 2.5) == 5);  // ceil(4 x 1.25)
  CHECK(g->desired(4, 1.0) == 2);
  CHECK(g->desired(4, 0.0) == 0);  // the fleet clamps to min_replicas
}

TEST_CASE("a pool scales up within window + interval + start-up after a step in load, and back down", "[autoscale]") {
  for (const std::string policy : {"threshold", "target"}) {
    INFO(policy);
    const AutoscaleConfig a =
        policy == "threshold"
            ? scaling({{"autoscale.policy", "threshold"}, {"autoscale.signal", "queue_depth"}, {"autoscale.up_above", "2"},
                       {"autoscale.down_below", "0.2"}, {"autoscale.interval_s", "5"}, {"autoscale.window_s", "15"},
                       {"autoscale.cooldown_s", "30"}})
            : scaling({{"autoscale.policy", "target"}, {"autoscale.signal", "active_seqs"}, {"autoscale.target", "4"},
                       {"autoscale.interval_s", "5"}, {"autoscale.window_s", "15"}, {"autoscale.cooldown_s", "30"}});
    StepLoad load(2.0, 60.0, 100.0, 200.0, 400.0);
    const ScaleRun r = run(a, load);
    const auto& s = r.rec->scale_samples();
    REQUIRE(s.size() > 10);
    CHECK(s.front().t == 0.0);
    CHECK(s.front().active == 1);
    double asked = -1, ready = -1, down = -1;
    for (const RequestEvent& e : r.rec->events()) {
      if (e.kind == RequestEvent::Kind::ReplicaStart && asked < 0) asked = e.t;
      if (e.kind == RequestEvent::Kind::ReplicaReady && ready < 0) ready = e.t;
      if (e.kind == RequestEvent::Kind::ReplicaDrain && e.t > 200 && down < 0) down = e.t;
    }
    CHECK(asked > 100.0);  // nothing before the step: one replica serves 2 req/s
    CHECK(asked <= 100.0 + 15.0 + 5.0);
    CHECK(ready == Approx(asked + 20.0));
    int most = 0;
    for (const ScaleSample& x : s) {
      CHECK(x.active + x.starting >= 1);  // min_replicas
      CHECK(x.paid() <= 6);               // the pool's size
      most = std::max(most, x.active);
    }
    CHECK(most >= 3);
    CHECK(down > 200.0);  // the load fell: it scales in again
    CHECK(s.back().active < most);
    CHECK(r.rec->num_finished() == r.stats.num_finished);
    CHECK(r.rec->num_arrived() == r.rec->num_finished());
  }
}

TEST_CASE("a replica drains before it goes off: nothing is routed to it and all of its own finish", "[autoscale]") {
  const AutoscaleConfig a = scaling({{"autoscale.policy", "threshold"}, {"autoscale.signal", "queue_depth"},
                                     {"autoscale.up_above", "1"}, {"autoscale.down_below", "0.5"},
                                     {"autoscale.interval_s", "2"}, {"autoscale.window_s", "4"},
                                     {"autoscale.cooldown_s", "4"}, {"autoscale.initial_replicas", "4"}});
  StepLoad load(1.0, 50.0, 20.0, 60.0, 150.0);
  const ScaleRun r = run(a, load, 6, 5.0);
  std::map<int, bool> draining;
  std::map<int, int> open;  // requests routed to each instance and not yet finished
  int drains = 0, offs = 0;
  for (const RequestEvent& e : r.rec->events()) {
    switch (e.kind) {
      case RequestEvent::Kind::Route:
        CHECK_FALSE(draining[e.instance]);
        ++open[e.instance];
        break;
      case RequestEvent::Kind::Finish: --open[e.instance]; break;
      case RequestEvent::Kind::ReplicaDrain:
        draining[e.instance] = true;
        ++drains;
        break;
      case RequestEvent::Kind::ReplicaReady: draining[e.instance] = false; break;
      case RequestEvent::Kind::ReplicaOff:
        if (draining[e.instance]) ++offs;
        CHECK(open[e.instance] == 0);
        draining[e.instance] = false;
        break;
      default: break;
    }
  }
  CHECK(drains > 0);
  CHECK(offs > 0);
  for (const auto& e : r.engines) CHECK(e->kv_cache().num_used_blocks() == 0);
}

TEST_CASE("an autoscaled pool pays for the replicas it held, not for its size", "[autoscale]") {
  const AutoscaleConfig a = scaling({{"autoscale.policy", "threshold"}, {"autoscale.up_above", "2"},
                                     {"autoscale.down_below", "0.2"}, {"autoscale.interval_s", "5"},
                                     {"autoscale.window_s", "15"}});
  StepLoad load(2.0, 60.0, 100.0, 200.0, 400.0);
  const ScaleRun r = run(a, load);
  Summary s = summarize(*r.rec, 6, SloConfig{});
  FleetCostFacts f;
  f.num_instances = 6;
  add_fleet_metrics(*r.rec, f, s);
  const double duration = s.get("duration_s");
  // The step function of paid replicas, integrated by hand over [first arrival, first arrival + duration].
  double t0 = 1e300;
  for (const RequestRecord& q : r.rec->requests()) t0 = std::min(t0, q.arrival_s);
  double expect = 0;
  const auto& x = r.rec->scale_samples();
  for (size_t k = 0; k < x.size(); ++k) {
    const double a0 = std::max(t0, x[k].t), b0 = std::min(t0 + duration, k + 1 < x.size() ? x[k + 1].t : t0 + duration);
    if (b0 > a0) expect += x[k].paid() * (b0 - a0);
  }
  CHECK(s.get("gpu_seconds") == Approx(expect));
  CHECK(s.get("gpu_seconds") < 0.8 * 6 * duration);
  CHECK(s.get("replicas_mean") == Approx(expect / duration));
}

TEST_CASE("bad autoscale keys are errors naming the key", "[autoscale]") {
  CHECK_THROWS_WITH(scaling({{"autoscale.policy", "threshold"}}).validate(4), Catch::Contains("autoscale.up_above"));
  CHECK_THROWS_WITH(scaling({{"autoscale.policy", "threshold"}, {"autoscale.up_above", "1"}, {"autoscale.down_below", "2"}})
                        .validate(4),
                    Catch::Contains("autoscale.down_below"));
  CHECK_THROWS_WITH(scaling({{"autoscale.policy", "target"}}).validate(4), Catch::Contains("autoscale.target"));
  CHECK_THROWS_WITH(scaling({{"autoscale.policy", "hpa"}}).validate(4), Catch::Contains("autoscale.policy"));
  CHECK_THROWS_WITH(scaling({{"autoscale.signal", "cpu"}}).validate(4), Catch::Contains("autoscale.signal"));
  CHECK_THROWS_WITH(scaling({{"autoscale.max_replicas", "9"}}).validate(4), Catch::Contains("pool's size"));
  CHECK_THROWS_WITH(scaling({{"autoscale.min_replicas", "0"}}).validate(4), Catch::Contains("autoscale.min_replicas"));
  CHECK_THROWS_WITH(scaling({{"autoscale.min_replicas", "3"}, {"autoscale.initial_replicas", "2"}}).validate(4),
                    Catch::Contains("autoscale.initial_replicas"));
  CHECK_THROWS_WITH(scaling({{"autoscale.window_s", "1"}, {"autoscale.interval_s", "5"}}).validate(4),
                    Catch::Contains("autoscale.window_s"));
  CHECK_THROWS_WITH(scaling({{"autoscale.load_gb_s", "inf"}}).validate(4), Catch::Contains("autoscale.load_gb_s"));
}
