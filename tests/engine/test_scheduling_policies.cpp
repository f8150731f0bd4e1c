// Scheduling policies through the real scheduler: the order in which waiting
// sequences are admitted, who is preempted, and the keys each policy owns.
// One running slot (max_num_seqs = 1) makes the admission order the order of
// first tokens.
#include <catch2/catch.hpp>
#include <algorithm>

#include "engine/common/option_table.h"
#include "engine/engine.h"
#include "engine/metrics/run_recorder.h"
#include "sim/cost_model.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

EngineConfig one_slot(const std::string& policy, const std::vector<std::pair<std::string, std::string>>& keys = {}) {
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = 1;
  cfg.max_model_len = 2048;
  cfg.cache.prefix_cache = false;
  cfg.scheduler.policy.name = policy;
  set_options(cfg.scheduler.policy, keys);
  return cfg;
}

std::unique_ptr<Engine> sim_engine(const EngineConfig& cfg, int num_blocks, MetricsSink* sink) {
  const ModelConfig model = micro_model(1000);
  return std::make_unique<Engine>(0, cfg, num_blocks,
                                  std::make_unique<SimExecutor>(make_cost_model(CostModelConfig{}, model), 1000), sink);
}

Request request(int64_t id, double arrival, int prompt, int output, int priority = 0) {
  Request r;
  r.id = id;
  r.arrival_s = arrival;
  r.prompt.assign(prompt, static_cast<int32_t>(id + 1));
  r.max_output_tokens = output;
  r.priority = priority;
  return r;
}

// Request ids in the order their first token came.
std::vector<int64_t> first_token_order(const RunRecorder& rec) {
  std::vector<RequestRecord> r = rec.requests();
  std::sort(r.begin(), r.end(), [](const RequestRecord& a, const RequestRecord& b) {
    return a.first_token_s != b.first_token_s ? a.first_token_s < b.first_token_s : a.id < b.id;
  });
  std::vector<int64_t> ids;
  for (const RequestRecord& x : r) ids.push_back(x.id);
  return ids;
}

}  // namespace

TEST_CASE("fcfs admits in arrival order, priority by priority then arrival", "[scheduler][policy]") {
  const std::vector<Request> reqs = {request(0, 0.0, 8, 3, 2), request(1, 0.0, 8, 3, 0), request(2, 0.0, 8, 3, 1),
                                     request(3, 0.0, 8, 3, 0)};
  RunRecorder fcfs_rec;
  run_virtual(*sim_engine(one_slot("fcfs"), 64, &fcfs_rec), reqs);
  CHECK(first_token_order(fcfs_rec) == std::vector<int64_t>{0, 1, 2, 3});
  RunRecorder prio_rec;
  run_virtual(*sim_engine(one_slot("priority"), 64, &prio_rec), reqs);
  CHECK(first_token_order(prio_rec) == std::vector<int64_t>{1, 3, 2, 0});
}

TEST_CASE("priority aging lets a long-waiting request overtake newer urgent ones", "[scheduler][policy]") {
  // Request 0 holds the only slot for about 4 s; request 1 (priority 3) waits
  // from t = 0.01; urgent requests (priority 0) keep arriving.
  std::vector<Request> reqs = {request(0, 0.0, 8, 400, 0), request(1, 0.01, 8, 3, 3)};
  for (int i = 0; i < 6; ++i) reqs.push_back(request(2 + i, 0.2 + 0.1 * i, 8, 3, 0));
  RunRecorder strict;
  run_virtual(*sim_engine(one_slot("priority"), 128, &strict), reqs);
  const auto strict_order = first_token_order(strict);
  CHECK(strict_order.back() == 1);  // without aging it waits for every urgent request
  RunRecorder aged;
  run_virtual(*sim_engine(one_slot("priority", {{"scheduler.priority_aging_s", "0.2"}}), 128, &aged), reqs);
  const auto aged_order = first_token_order(aged);
  // Waited ~4 s, 19 levels of 0.2 s: level 0 by the time the slot frees, and it arrived first.
  CHECK(aged_order[0] == 0);
  CHECK(aged_order[1] == 1);
}

TEST_CASE("sjf admits the shortest remaining prompt first", "[scheduler][policy]") {
  const std::vector<Request> reqs = {request(0, 0.0, 300, 2), request(1, 0.0, 10, 2), request(2, 0.0, 100, 2),
                                     request(3, 0.0, 10, 2)};
  RunRecorder rec;
  run_virtual(*sim_engine(one_slot("sjf"), 128, &rec), reqs);
  CHECK(first_token_order(rec) == std::vector<int64_t>{1, 3, 2, 0});
}

TEST_CASE("priority preempts the least urgent running sequence, fcfs the newest", "[scheduler][policy]") {
  // Three sequences of two blocks each fill six blocks; the next tokens need a
  // seventh, so one must go. The newest (id 2) is the most urgent.
  for (const std::string policy : {"fcfs", "priority"}) {
    INFO(policy);
    EngineConfig cfg;
    cfg.scheduler.max_batch_tokens = 64;
    cfg.cache.block_size = 4;
    cfg.cache.prefix_cache = false;
    cfg.max_model_len = 1024;
    cfg.scheduler.policy.name = policy;
    auto engine = sim_engine(cfg, 6, nullptr);
    engine->add_request(request(0, 0.0, 7, 10, 1), 0.0);
    engine->add_request(request(1, 0.0, 7, 10, 5), 0.0);
    engine->add_request(request(2, 0.0, 7, 10, 0), 0.0);
    StepPlan p = engine->begin_step(0.0);
    REQUIRE(p.batch.num_seqs() == 3);
    engine->end_step(p, engine->executor().execute(p.batch), 0.01);
    p = engine->begin_step(0.01);
    engine->end_step(p, engine->executor().execute(p.batch), 0.02);
    p = engine->begin_step(0.02);
    REQUIRE(p.batch.preempted.size() == 1);
    CHECK(p.batch.preempted[0] == (policy == "fcfs" ? 2 : 1));
    CHECK(engine->check_invariants().empty());
  }
}

TEST_CASE("policies own their keys and validate them", "[scheduler][policy]") {
  SchedulerConfig c;
  OptionTable t;
  c.bind(t);
  CHECK(t.contains("scheduler.priority_aging_s"));
  t.set("scheduler.policy", "priority");
  t.set("scheduler.priority_aging_s", "-1");
  CHECK_THROWS_WITH(c.validate(), Catch::StartsWith("scheduler.priority_aging_s"));
  t.set("scheduler.priority_aging_s", "1");
  t.set("scheduler.policy", "round_robin");
  CHECK_THROWS_WITH(c.validate(), Catch::StartsWith("scheduler.policy") && Catch::Contains("sjf"));
}
