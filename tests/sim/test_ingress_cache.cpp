// The semantic cache in front of a fleet: at tau = 1 a request is answered
// exactly when an engine finished the same prompt before it arrived (the
// ground truth, from the regenerated workload); answers arrive ingress.lookup_s
// after the request and misses reach the engines that much later; a lower tau
// on a workload of near-duplicate intents answers more and some wrongly; the
// cache saves engine time and every request is still accounted for.
#include <catch2/catch.hpp>

#include <map>

#include "engine/common/option_table.h"
#include "engine/metrics/fleet_metrics.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "sim/cost_model.h"
#include "sim/fleet.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"
#include "support/sim_harness.h"
#include "traces/workload.h"

using namespace testbed;

namespace {

WorkloadConfig questions(int n) {
  WorkloadConfig w;
  w.kind.name = "semantic";
  w.num_requests = n;
  w.rate = 40;
  w.output_tokens = 20;
  w.seed = 11;
  set_options(w, {{"workload.kind", "semantic"},
                  {"workload.num_intents", "150"},
                  {"workload.exact_repeat", "0.4"},
                  {"workload.prompt_tokens", "64"},
                  {"workload.embedding_dim", "32"},
                  {"workload.intent_clusters", "15"},
                  {"workload.topic_spread", "0.3"}});
  return w;
}

struct CacheRun {
  std::unique_ptr<RunRecorder> rec = std::make_unique<RunRecorder>();
  Summary summary;
};

CacheRun run(const WorkloadConfig& w, const std::vector<std::pair<std::string, std::string>>& cache_keys) {
  const ModelConfig model = test::micro_model(1000);
  std::shared_ptr<const CostModel> cost = test::linear_cost(model);
  EngineConfig cfg;
  cfg.max_model_len = 1024;
  CacheRun out;
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<FleetPool> pools(1);
  for (int i = 0; i < 2; ++i) {
    engines.push_back(std::make_unique<Engine>(i, cfg, 300, std::make_unique<SimExecutor>(cost, 1000), out.rec.get()));
    pools[0].engines.push_back(engines.back().get());
  }
  RouterSetup rs;
  rs.num_instances = 2;
  rs.blocks_per_instance = 300;
  pools[0].router = make_router(router_choice("least_loaded"), rs);
  FleetOptions opt;
  opt.sink = out.rec.get();
  set_options(opt.semantic_cache, cache_keys);
  WorkloadContext ctx;
  ctx.vocab_size = 1000;
  auto source = make_workload(w, ctx);
  Fleet fleet(std::move(pools), opt);
  fleet.run(*source, nullptr);
  out.summary = summarize(*out.rec, 2, SloConfig{});
  FleetCostFacts f;
  f.num_instances = 2;
  add_fleet_metrics(*out.rec, f, out.summary);
  return out;
}

}  // namespace

TEST_CASE("at tau = 1 the ingress answers exactly the prompts an engine finished before they arrived", "[ingress_cache]") {
  const WorkloadConfig w = questions(800);
  const CacheRun r = run(w, {{"ingress.semantic_cache", "true"}, {"ingress.semantic_tau", "1"}, {"ingress.lookup_s", "0"}});
  REQUIRE(r.rec->num_arrived() == 800);
  REQUIRE(r.rec->num_finished() == 800);
  // The ground truth from the regenerated requests and the engines' finish times.
  WorkloadContext ctx;
  ctx.vocab_size = 1000;
  auto again = make_workload(w, ctx);
  std::map<int64_t, Request> by_id;
  while (auto q = again->next()) by_id[q->id] = *q;
  std::map<int64_t, const RequestRecord*> rec;
  for (const RequestRecord& q : r.rec->requests()) rec[q.id] = &q;
  int expected = 0, answered = 0;
  for (const auto& [id, q] : by_id) {
    bool seen = false;
    for (const auto& [other, p] : by_id) {
      const RequestRecord& o = *rec.at(other);
      if (o.answered_by == 0 && p.prompt == q.prompt && o.finish_s < q.arrival_s) seen = true;
    }
    const RequestRecord& mine = *rec.at(id);
    CHECK((mine.answered_by == 1) == seen);
    CHECK(mine.answered_by != 2);
    CHECK_FALSE(mine.false_hit);
    expected += seen;
    answered += mine.answered_by > 0;
  }
  CHECK(expected > 100);  // the workload repeats itself
  CHECK(answered == expected);
  CHECK(r.summary.get("ingress_exact_hit_rate") == Approx(expected / 800.0));
  CHECK(r.summary.get("ingress_false_hit_rate") == 0);
}

TEST_CASE("answers come after the lookup, misses reach the engines that much later", "[ingress_cache]") {
  const CacheRun r = run(questions(400), {{"ingress.semantic_cache", "true"}, {"ingress.lookup_s", "0.05"}});
  for (const RequestRecord& q : r.rec->requests()) {
    if (q.answered_by > 0) {
      CHECK(q.ttft_s() == Approx(0.05));
      CHECK(q.instance == -1);
    } else {
      CHECK(q.ttft_s() > 0.05);
    }
  }
}

TEST_CASE("a lower tau answers more, some wrongly, and saves engine time", "[ingress_cache]") {
  const WorkloadConfig w = questions(800);
  const CacheRun none = run(w, {});
  const CacheRun strict = run(w, {{"ingress.semantic_cache", "true"}, {"ingress.semantic_tau", "0.99"}});
  const CacheRun loose = run(w, {{"ingress.semantic_cache", "true"}, {"ingress.semantic_tau", "0.85"}});
  const auto answered = [](const CacheRun& r) {
    return r.summary.get("ingress_exact_hit_rate") + r.summary.get("ingress_semantic_hit_rate");
  };
  CHECK(answered(loose) > answered(strict));
  CHECK(loose.summary.get("ingress_semantic_hit_rate") > strict.summary.get("ingress_semantic_hit_rate"));
  CHECK(loose.summary.get("ingress_false_hit_rate") > strict.summary.get("ingress_false_hit_rate"));
  CHECK(loose.summary.get("ingress_false_hit_rate") > 0);
  CHECK(none.rec->busy_s() > strict.rec->busy_s());
  CHECK(strict.rec->busy_s() > loose.rec->busy_s());
  CHECK(strict.summary.get("ingress_gpu_seconds_saved") > 0);
  for (const CacheRun* r : {&none, &strict, &loose}) CHECK(r->rec->num_finished() == 800);
}
