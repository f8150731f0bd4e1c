// Cancellation: a client that leaves after N tokens receives exactly N and its
// blocks are free in that step; a client deadline cancels a running or a
// waiting sequence at the next step; request conservation (arrived = finished
// + cancelled) and the KV invariants hold under random cancellations behind
// every router, and the KV events a router hears account for every cached block.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/common/option_table.h"
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

std::unique_ptr<Engine> sim_engine(RunRecorder& rec, int num_blocks = 200, int max_num_seqs = 256,
                                   bool prefix_cache = false) {
  EngineConfig cfg;
  cfg.max_model_len = 1024;
  cfg.scheduler.max_num_seqs = max_num_seqs;
  cfg.cache.prefix_cache = prefix_cache;
  return std::make_unique<Engine>(0, cfg, num_blocks, std::make_unique<SimExecutor>(test::linear_cost(test::micro_model(1000)), 1000),
                                  &rec);
}

Request request(int64_t id, double arrival, int prompt, int output) {
  Rng rng(static_cast<uint64_t>(id) + 11);
  Request r;
  r.id = id;
  r.arrival_s = arrival;
  r.prompt = test::random_tokens(rng, prompt, 1000);
  r.max_output_tokens = output;
  return r;
}

// Steps of 10 ms on a virtual clock until the engine holds nothing; `check` after each step.
template <class Check>
void run_steps(Engine& e, Check check) {
  double now = 0.0;
  while (e.has_unfinished()) {
    const StepPlan plan = e.begin_step(now);
    if (!plan.empty()) e.end_step(plan, e.executor().execute(plan.batch), now + 0.01);
    now += 0.01;
    check(e);
  }
}

}  // namespace

TEST_CASE("a client that leaves after N tokens receives N and frees its blocks in that step", "[cancel]") {
  RunRecorder rec;
  auto e = sim_engine(rec);
  Request r = request(0, 0.0, 100, 50);
  r.cancel_after_tokens = 3;
  e->add_request(r, 0.0);
  e->add_request(request(1, 0.0, 40, 8), 0.0);
  int steps = 0, cancel_step = -1;
  run_steps(*e, [&](Engine& eng) {
    ++steps;
    CHECK(eng.check_invariants().empty());
    if (cancel_step < 0 && rec.num_cancelled() == 1) {
      cancel_step = steps;
      // Only request 1's blocks remain: 40 prompt + its tokens so far, 16 per block.
      CHECK(eng.kv_cache().num_used_blocks() == eng.kv_cache().blocks_needed(40 + 3));
    }
  });
  CHECK(cancel_step == 3);  // the prefill step gives token 1; two decode steps give 2 and 3
  REQUIRE(rec.cancelled().size() == 1);
  const CancelRecord& c = rec.cancelled()[0];
  CHECK(c.id == 0);
  CHECK(c.output_tokens == 3);
  CHECK(c.reason == CancelReason::Tokens);
  CHECK(c.first_token_s > 0);
  CHECK(rec.num_finished() == 1);
  CHECK(e->kv_cache().num_used_blocks() == 0);
  CHECK(e->num_cancelled() == 1);
}

TEST_CASE("a client deadline cancels a running or a waiting sequence at the next step", "[cancel]") {
  RunRecorder rec;
  auto e = sim_engine(rec, 200, /*max_num_seqs=*/1);
  Request running = request(0, 0.0, 30, 100);
  running.cancel_after_s = 0.035;  // steps start at 0, 0.01, ...: cancelled when the one at 0.04 begins
  Request waiting = request(1, 0.0, 30, 5);
  waiting.cancel_after_s = 0.015;  // behind request 0 (one sequence at a time): never runs
  e->add_request(running, 0.0);
  e->add_request(waiting, 0.0);
  e->add_request(request(2, 0.0, 30, 4), 0.0);
  run_steps(*e, [](Engine& eng) { CHECK(eng.check_invariants().empty()); });
  REQUIRE(rec.cancelled().size() == 2);
  std::map<int64_t, CancelRecord> by_id;
  for (const CancelRecord& c : rec.cancelled()) by_id[c.id] = c;
  CHECK(by_id.at(0).cancel_s == Approx(0.04));
  CHECK(by_id.at(0).output_tokens == 4);  // tokens at the ends of the steps started at 0, 0.01, 0.02, 0.03
  CHECK(by_id.at(0).reason == CancelReason::Deadline);
  CHECK(by_id.at(1).cancel_s == Approx(0.02));
  CHECK(by_id.at(1).output_tokens == 0);
  CHECK(by_id.at(1).first_token_s == -1);
  REQUIRE(rec.num_finished() == 1);
  CHECK(rec.requests()[0].id == 2);
  CHECK(rec.requests()[0].first_token_s == Approx(0.05));  // starts the moment request 0 is gone
  CHECK(e->kv_cache().num_used_blocks() == 0);
}

TEST_CASE("the cancel draws mark the configured share, apart from every other draw", "[cancel]") {
  WorkloadConfig w;
  w.num_requests = 4000;
  w.rate = 100;
  w.seed = 7;
  WorkloadContext ctx;
  ctx.vocab_size = 1000;
  auto plain = make_workload(w, ctx);
  w.cancel_fraction = 0.25;
  w.cancel_mean = 2.0;
  auto timed = make_workload(w, ctx);
  w.cancel_after = "tokens";
  w.cancel_mean = 20;
  auto counted = make_workload(w, ctx);
  int by_time = 0, by_tokens = 0;
  double time_sum = 0, token_sum = 0;
  for (int i = 0; i < 4000; ++i) {
    const Request a = *plain->next(), b = *timed->next(), c = *counted->next();
    REQUIRE(a.prompt == b.prompt);  // cancellation changes no other draw
    REQUIRE(a.arrival_s == b.arrival_s);
    CHECK(a.cancel_after_s < 0);
    if (b.cancel_after_s >= 0) ++by_time, time_sum += b.cancel_after_s;
    if (c.cancel_after_tokens > 0) ++by_tokens, token_sum += c.cancel_after_tokens;
    CHECK((b.cancel_after_s >= 0) == (c.cancel_after_tokens > 0));  // the same requests, by the same draws
  }
  // Binomial(4000, 0.25): sd 27.4; 4.5 sd either side.
  CHECK(std::abs(by_time - 1000) < 125);
  CHECK(by_time == by_tokens);
  // Exponential mean 2 s over ~1000 draws: sd of the mean 0.063.
  CHECK(time_sum / by_time == Approx(2.0).margin(0.3));
  // ceil(exponential, mean 20) has mean about 20.5.
  CHECK(token_sum / by_tokens == Approx(20.5).margin(3.0));
}

TEST_CASE("conservation and KV invariants hold under random cancellations behind every router", "[cancel][fleet]") {
  const ModelConfig model = test::micro_model(1000);
  for (const std::string& type : RouterRegistry::instance().names()) {
    for (const std::string mode : {"time", "tokens"}) {
      INFO(type << " " << mode);
      RunRecorder rec;
      EngineConfig cfg;
      cfg.max_model_len = 1024;
      cfg.scheduler.max_batch_tokens = 512;
      std::vector<std::unique_ptr<Engine>> engines;
      std::vector<Engine*> raw;
      for (int i = 0; i < 4; ++i) {
        // Few blocks: preemptions and evictions happen too.
        engines.push_back(std::make_unique<Engine>(i, cfg, 120, std::make_unique<SimExecutor>(test::linear_cost(model), 1000), &rec));
        raw.push_back(engines.back().get());
      }
      WorkloadConfig w;
      w.num_requests = 400;
      w.rate = 60;
      w.output_tokens = 40;
      w.seed = 9;
      w.cancel_fraction = 0.4;
      w.cancel_after = mode;
      w.cancel_mean = mode == "time" ? 0.1 : 10;
      set_options(w, {{"workload.system_prompt_tokens", "256"}, {"workload.user_tokens", "40"}, {"workload.num_prefixes", "6"}});
      WorkloadContext ctx;
      ctx.vocab_size = 1000;
      auto source = make_workload(w, ctx);
      RouterSetup rs;
      rs.num_instances = 4;
      rs.blocks_per_instance = 120;
      Fleet fleet(raw, make_router(router_choice(type), rs), 0.0, &rec);
      const SimulationStats stats = fleet.run(*source, nullptr);
      CHECK(rec.num_arrived() == 400);
      CHECK(rec.num_finished() + rec.num_cancelled() == 400);
      CHECK(stats.num_finished + stats.num_cancelled == 400);
      CHECK(rec.num_cancelled() > 40);  // of ~160 marked: the others finished first
      int cached = 0;
      for (auto& e : engines) {
        CHECK(e->kv_cache().num_used_blocks() == 0);
        CHECK(e->check_invariants().empty());
        cached += e->kv_cache().num_cached_blocks();
      }
      // Every block a router heard stored and not removed is cached in its engine.
      CHECK(rec.num_blocks_stored() - rec.num_blocks_removed() == cached);
      for (const CancelRecord& c : rec.cancelled()) {
        CHECK(c.cancel_s >= c.arrival_s);
        if (mode == "tokens") CHECK(c.reason == CancelReason::Tokens);
      }
    }
  }
}
