// Faults (sim/faults.h): a failed instance's requests are recomputed elsewhere
// (or lost and counted) and it takes no more; a straggler's steps take k times
// longer in its window and only there; late KV events change routing but the
// router's index ends equal to the caches; conservation and the KV invariants
// hold under random cancellations, failures and stragglers together; bad
// fault keys are errors naming the key.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/metrics/run_recorder.h"
#include "sim/cost_model.h"
#include "sim/fleet.h"
#include "sim/prefix_index.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"
#include "support/sim_harness.h"
#include "traces/workload.h"

using namespace testbed;

namespace {

struct FaultRun {
  std::unique_ptr<RunRecorder> rec = std::make_unique<RunRecorder>(true, false, true);
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<int64_t> routed;
  SimulationStats stats;
  std::string index_mismatch;  // prefix_precise: where its index and the caches disagree at the end
};

WorkloadConfig prompts(int n, double rate, uint64_t seed = 3) {
  WorkloadConfig w;
  w.num_requests = n;
  w.rate = rate;
  w.output_tokens = 24;
  w.seed = seed;
  set_options(w, {{"workload.system_prompt_tokens", "256"}, {"workload.user_tokens", "48"}, {"workload.num_prefixes", "12"}});
  return w;
}

FaultRun run(const std::string& router, int instances, const WorkloadConfig& w, const FaultConfig& faults,
             int num_blocks = 300) {
  const ModelConfig model = test::micro_model(1000);
  std::shared_ptr<const CostModel> cost = test::linear_cost(model);
  EngineConfig cfg;
  cfg.max_model_len = 1024;
  cfg.scheduler.max_batch_tokens = 512;
  FaultRun out;
  std::vector<FleetPool> pools(1);
  for (int i = 0; i < instances; ++i) {
    out.engines.push_back(std::make_unique<Engine>(i, cfg, num_blocks, std::make_unique<SimExecutor>(cost, 1000), out.rec.get()));
    pools[0].engines.push_back(out.engines.back().get());
  }
  RouterSetup rs;
  rs.num_instances = instances;
  rs.blocks_per_instance = num_blocks;
  pools[0].router = make_router(router_choice(router), rs);
  const Router* r = pools[0].router.get();
  WorkloadContext ctx;
  ctx.vocab_size = 1000;
  auto source = make_workload(w, ctx);
  FleetOptions opt;
  opt.sink = out.rec.get();
  opt.log_events = true;
  opt.faults = faults;
  Fleet fleet(std::move(pools), opt);
  out.stats = fleet.run(*source, nullptr);
  out.routed = fleet.routed();
  if (const PrefixIndex* index = r->prefix_index()) {
    std::map<uint64_t, std::set<int>> heard, held;
    index->for_each([&](uint64_t h, const InstanceSet& s) { s.for_each([&](int i) { heard[h].insert(i); }); });
    for (int i = 0; i < instances; ++i) out.engines[i]->kv_cache().for_each_cached([&](uint64_t h) { held[h].insert(i); });
    if (heard != held)
      out.index_mismatch = std::to_string(heard.size()) + " hashes in the index, " + std::to_string(held.size()) + " cached";
  }
  return out;
}

FaultConfig faults(const std::vector<std::pair<std::string, std::string>>& keys) {
  FaultConfig f;
  set_options(f, keys);
  return f;
}

}  // namespace

TEST_CASE("a failed instance's requests are recomputed elsewhere and it takes no more", "[faults]") {
  const FaultRun r = run("prefix_precise", 4, prompts(400, 80.0), faults({{"fault.fail", "1@2.0"}}));
  CHECK(r.rec->num_arrived() == 400);
  CHECK(r.rec->num_finished() == 400);
  CHECK(r.stats.num_restarts > 0);
  int restarted = 0;
  for (const RequestRecord& q : r.rec->requests()) {
    restarted += q.restarts;
    if (q.instance == 1) CHECK(q.finish_s <= 2.0);  // nothing finishes on the failed instance after it failed
  }
  CHECK(restarted == r.stats.num_restarts);
  double fail_t = -1;
  for (const RequestEvent& e : r.rec->events()) {
    if (e.kind == RequestEvent::Kind::Fail) fail_t = e.t;
    if (fail_t >= 0 && e.kind == RequestEvent::Kind::Route) CHECK(e.instance != 1);
  }
  CHECK(fail_t == 2.0);
  CHECK(r.engines[1]->kv_cache().num_cached_blocks() == 0);
  for (const auto& e : r.engines) CHECK(e->kv_cache().num_used_blocks() == 0);
  CHECK(r.index_mismatch.empty());  // the router heard the failed cache cleared
}

TEST_CASE("with fault.on_failure = lose a failed instance's requests are lost and counted", "[faults]") {
  const FaultRun r = run("round_robin", 3, prompts(300, 80.0), faults({{"fault.fail", "0@1.0"}, {"fault.on_failure", "lose"}}));
  CHECK(r.stats.num_lost > 0);
  CHECK(r.rec->num_finished() + r.rec->num_cancelled() == 300);
  for (const CancelRecord& c : r.rec->cancelled()) {
    CHECK(c.reason == CancelReason::Lost);
    CHECK(c.instance == 0);
    CHECK(c.cancel_s == 1.0);
  }
  CHECK(r.stats.num_lost == static_cast<int64_t>(r.rec->cancelled().size()));
}

TEST_CASE("a straggler's steps take k times longer in its window and only there", "[faults]") {
  const WorkloadConfig w = prompts(200, 40.0);
  const FaultRun base = run("round_robin", 1, w, {});
  const FaultRun slow = run("round_robin", 1, w, faults({{"fault.slow", "0@1.0-2.0x3"}}));
  const auto& a = base.rec->steps();
  const auto& b = slow.rec->steps();
  size_t k = 0;
  for (; k < a.size() && a[k].start_s < 1.0; ++k) {  // identical before the window
    REQUIRE(k < b.size());
    CHECK(a[k].start_s == b[k].start_s);
    CHECK(a[k].duration_s == b[k].duration_s);
  }
  // The first step in the window: the same batch, three times as long.
  REQUIRE(k < b.size());
  CHECK(a[k].start_s == b[k].start_s);
  CHECK(a[k].prefill_tokens == b[k].prefill_tokens);
  CHECK(a[k].decode_tokens == b[k].decode_tokens);
  CHECK(b[k].duration_s == Approx(3 * a[k].duration_s));
  for (const StepRecord& s : b)
    if (s.start_s >= 2.0) CHECK(s.duration_s < 3 * 0.2);  // back to normal speed after the window
  CHECK(slow.rec->requests().back().finish_s > base.rec->requests().back().finish_s);
}

TEST_CASE("late KV events change routing but never corrupt the router's index", "[faults]") {
  const WorkloadConfig w = prompts(400, 120.0);
  const FaultRun fresh = run("prefix_precise", 4, w, {});
  const FaultRun zero = run("prefix_precise", 4, w, faults({{"fault.kv_event_delay_s", "0"}}));
  CHECK(zero.routed == fresh.routed);  // a zero delay is no fault
  const FaultRun late = run("prefix_precise", 4, w, faults({{"fault.kv_event_delay_s", "0.2"}}));
  CHECK(late.routed != fresh.routed);
  CHECK(late.rec->num_finished() == 400);
  CHECK(fresh.index_mismatch.empty());
  CHECK(late.index_mismatch.empty());  // every delayed event landed, in order
  double hits_fresh = 0, hits_late = 0;
  for (const RequestRecord& q : fresh.rec->requests()) hits_fresh += q.cached_tokens;
  for (const RequestRecord& q : late.rec->requests()) hits_late += q.cached_tokens;
  CHECK(hits_late < hits_fresh);  // stale state routes some prompts away from their prefix
}

TEST_CASE("conservation and KV invariants hold under random cancellations, failures and stragglers", "[faults][cancel]") {
  Rng rng(42);
  for (const std::string& type : RouterRegistry::instance().names()) {
    for (const std::string mode : {"reroute", "lose"}) {
      INFO(type << " " << mode);
      WorkloadConfig w = prompts(300, 100.0, rng.next_u64() % 1000);
      w.cancel_fraction = 0.3;
      w.cancel_mean = 0.2;
      const std::string fail = std::to_string(rng.below(4)) + "@" + std::to_string(0.5 + rng.uniform()) + "," +
                               std::to_string(4 + rng.below(2)) + "@" + std::to_string(1.5 + rng.uniform());
      const FaultRun r = run(type, 6, w,
                             faults({{"fault.fail", fail},
                                     {"fault.on_failure", mode},
                                     {"fault.slow", "2@0.2-1.5x4"},
                                     {"fault.kv_event_delay_s", "0.03"}}),
                             /*num_blocks=*/150);
      CHECK(r.rec->num_arrived() == 300);
      CHECK(r.rec->num_finished() + r.rec->num_cancelled() == 300);
      int64_t routed = 0;
      for (int64_t x : r.routed) routed += x;
      CHECK(routed == 300 + r.stats.num_restarts);  // a restart is routed again
      for (const auto& e : r.engines) {
        CHECK(e->kv_cache().num_used_blocks() == 0);
        CHECK(e->check_invariants().empty());
      }
      CHECK(r.index_mismatch.empty());
    }
  }
}

TEST_CASE("bad fault keys are errors naming the key", "[faults]") {
  CHECK_THROWS_WITH(faults({{"fault.fail", "x@1"}}).validate(4), Catch::Contains("fault.fail"));
  CHECK_THROWS_WITH(faults({{"fault.fail", "1"}}).validate(4), Catch::Contains("INSTANCE@TIME"));
  CHECK_THROWS_WITH(faults({{"fault.fail", "7@1"}}).validate(4), Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(faults({{"fault.fail", "1@1,1@2"}}).validate(4), Catch::Contains("fails twice"));
  CHECK_THROWS_WITH(faults({{"fault.fail", "0@1"}}).validate(1), Catch::Contains("nowhere to go"));
  CHECK_NOTHROW(faults({{"fault.fail", "0@1"}, {"fault.on_failure", "lose"}}).validate(1));
  CHECK_THROWS_WITH(faults({{"fault.slow", "1@5-2x3"}}).validate(4), Catch::Contains("START < END"));
  CHECK_THROWS_WITH(faults({{"fault.slow", "1@1-2x0.5"}}).validate(4), Catch::Contains(">= 1"));
  CHECK_THROWS_WITH(faults({{"fault.slow", "1@1-2xinf"}}).validate(4), Catch::Contains("finite"));
  CHECK_THROWS_WITH(faults({{"fault.on_failure", "retry"}}).validate(4), Catch::Contains("fault.on_failure"));
  CHECK_THROWS_WITH(faults({{"fault.kv_event_delay_s", "-1"}}).validate(4), Catch::Contains("fault.kv_event_delay_s"));
}
