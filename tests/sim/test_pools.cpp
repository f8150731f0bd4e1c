// Pools and prefill/decode disaggregation in the simulated fleet: request
// conservation across pools with no leaked block on either side, the order of
// a request's events (no transfer before the first token, no decode before the
// transfer lands), back-pressure that delays but loses nothing, prefix reuse on
// the decode side, the link model, and a golden event log.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "sim/cost_model.h"
#include "sim/fleet.h"
#include "sim/kv_link.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"
#include "support/sim_harness.h"
#include "traces/workload.h"

using namespace testbed;

namespace {

// Records every request event and, per request, when its tokens reached the
// client from which instance.
class TraceSink : public RunRecorder {
 public:
  TraceSink() : RunRecorder(true, false, true) {}
  void on_token(int instance, const Sequence& seq, double t, double gap_s) override {
    RunRecorder::on_token(instance, seq, t, gap_s);
    tokens[seq.id()].emplace_back(instance, t);
  }
  // From a transfer's start to its end the sender still holds the blocks and the receiver has reserved its own.
  void on_request_event(const RequestEvent& e) override {
    RunRecorder::on_request_event(e);
    if (e.kind == RequestEvent::Kind::PrefillDone) prefill_of[e.request] = e.instance;
    const bool transfer = e.kind == RequestEvent::Kind::TransferStart || e.kind == RequestEvent::Kind::TransferDone;
    if (!transfer || engines == nullptr) return;
    ++transfers_checked;
    held_both_sides &= (*engines)[prefill_of.at(e.request)]->kv_cache().num_exports() > 0;
    held_both_sides &= (*engines)[e.instance]->num_importing() > 0;
  }
  std::map<int64_t, std::vector<std::pair<int, double>>> tokens;
  std::map<int64_t, int> prefill_of;
  const std::vector<std::unique_ptr<Engine>>* engines = nullptr;
  int transfers_checked = 0;
  bool held_both_sides = true;
};

struct PdRun {
  std::unique_ptr<TraceSink> rec = std::make_unique<TraceSink>();
  std::vector<std::unique_ptr<Engine>> engines;
  SimulationStats stats;
};

WorkloadConfig shared_prompts(int n, double rate, int prefixes = 4) {
  WorkloadConfig w;
  w.num_requests = n;
  w.rate = rate;
  w.output_tokens = 12;
  w.seed = 5;
  set_options(w, {{"workload.system_prompt_tokens", "128"},
                  {"workload.user_tokens", "40"},
                  {"workload.num_prefixes", std::to_string(prefixes)}});
  return w;
}

// `p` prefill and `d` decode instances of a micro model on a linear cost model.
PdRun run_pd(int p, int d, const WorkloadConfig& w, int decode_blocks = 400, KvLinkConfig link = {},
             const std::string& decode_router = "least_loaded") {
  const ModelConfig model = test::micro_model(1000);
  std::shared_ptr<const CostModel> cost = test::linear_cost(model);
  EngineConfig cfg;
  cfg.max_model_len = 1024;
  cfg.scheduler.max_batch_tokens = 256;
  PdRun out;
  out.rec->engines = &out.engines;
  std::vector<FleetPool> pools(2);
  pools[0].name = "prefill";
  pools[0].takes_arrivals = true;
  pools[0].hands_off = true;
  pools[1].name = "decode";
  pools[1].takes_arrivals = false;
  pools[1].receives_handoffs = true;
  pools[1].link = link;
  pools[1].kv_bytes_per_token = static_cast<double>(model.kv_bytes_per_token(2));
  pools[1].num_layers = model.num_layers;
  for (int i = 0; i < p + d; ++i) {
    EngineConfig c = cfg;
    c.hand_off_after_prefill = i < p;
    const int blocks = i < p ? 400 : decode_blocks;
    out.engines.push_back(std::make_unique<Engine>(i, c, blocks, std::make_unique<SimExecutor>(cost, 1000), out.rec.get()));
    pools[i < p ? 0 : 1].engines.push_back(out.engines.back().get());
  }
  for (int k = 0; k < 2; ++k) {
    RouterSetup rs;
    rs.num_instances = static_cast<int>(pools[k].engines.size());
    rs.blocks_per_instance = pools[k].engines.front()->kv_cache().num_blocks();
    pools[k].router = make_router(router_choice(k == 0 ? "round_robin" : decode_router), rs);
  }
  WorkloadContext ctx;
  ctx.vocab_size = 1000;
  auto source = make_workload(w, ctx);
  FleetOptions opt;
  opt.sink = out.rec.get();
  opt.log_events = true;
  Fleet fleet(std::move(pools), opt);
  out.stats = fleet.run(*source, nullptr);
  return out;
}

std::map<int64_t, std::map<std::string, double>> event_times(const RunRecorder& rec) {
  std::map<int64_t, std::map<std::string, double>> out;
  for (const RequestEvent& e : rec.events()) out[e.request].emplace(request_event_name(e.kind), e.t);
  return out;
}

std::string format_events(const RunRecorder& rec) {
  std::ostringstream out;
  out << "t,event,request,instance,bytes\n";
  for (const RequestEvent& e : rec.events()) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%.6f,%s,%lld,%d,%lld\n", e.t, request_event_name(e.kind),
                  static_cast<long long>(e.request), e.instance, static_cast<long long>(e.bytes));
    out << buf;
  }
  return out.str();
}

}  // namespace

TEST_CASE("a disaggregated fleet conserves requests, holds KV on both sides during a transfer, and leaks no block", "[pools]") {
  const PdRun r = run_pd(2, 3, shared_prompts(200, 60.0));
  CHECK(r.rec->num_arrived() == 200);
  CHECK(r.rec->num_finished() == 200);
  CHECK(r.stats.num_handoffs == 200);
  for (const RequestRecord& q : r.rec->requests()) {
    CHECK(q.prefill_instance >= 0);
    CHECK(q.prefill_instance < 2);
    CHECK(q.instance >= 2);  // finished on a decode instance
    CHECK(q.output_tokens == 12);
  }
  CHECK(r.rec->transfers_checked == 2 * 200);
  CHECK(r.rec->held_both_sides);
  for (const auto& e : r.engines) {
    INFO("instance " << e->instance());
    CHECK(e->kv_cache().num_used_blocks() == 0);
    CHECK(e->kv_cache().num_exports() == 0);
    CHECK(e->num_importing() == 0);
    CHECK(e->check_invariants().empty());
  }
}

TEST_CASE("no transfer starts before the first token and no decode before the transfer lands", "[pools]") {
  const PdRun r = run_pd(1, 2, shared_prompts(120, 80.0));
  const auto times = event_times(*r.rec);
  REQUIRE(times.size() == 120);
  for (const RequestRecord& q : r.rec->requests()) {
    INFO("request " << q.id);
    const auto& t = times.at(q.id);
    REQUIRE(t.count("transfer_start"));
    REQUIRE(t.count("transfer_done"));
    CHECK(t.at("route") == q.arrival_s);
    CHECK(t.at("first_token") == q.first_token_s);
    CHECK(t.at("prefill_done") == q.first_token_s);
    CHECK(t.at("transfer_start") >= t.at("first_token"));
    CHECK(t.at("transfer_done") > t.at("transfer_start"));
    CHECK(t.at("finish") == q.finish_s);
    CHECK(q.handoff_wait_s == Approx(t.at("transfer_start") - t.at("first_token")).margin(1e-12));
    CHECK(q.transfer_s == Approx(t.at("transfer_done") - t.at("transfer_start")).margin(1e-12));
    // Every token after the first came from the decode instance, after the transfer.
    const auto& toks = r.rec->tokens.at(q.id);
    REQUIRE(toks.size() >= 1);
    for (const auto& [instance, when] : toks) {
      CHECK(instance == q.instance);
      CHECK(when > t.at("transfer_done"));
    }
  }
}

TEST_CASE("a decode pool too small delays hand-offs but loses none", "[pools]") {
  // 12 blocks of 16 tokens hold one 168-token prompt and its output at a time.
  const PdRun roomy = run_pd(1, 1, shared_prompts(40, 200.0));
  const PdRun tight = run_pd(1, 1, shared_prompts(40, 200.0), 12);
  CHECK(tight.rec->num_finished() == 40);
  double wait = 0, roomy_wait = 0;
  for (const RequestRecord& q : tight.rec->requests()) wait += q.handoff_wait_s;
  for (const RequestRecord& q : roomy.rec->requests()) roomy_wait += q.handoff_wait_s;
  CHECK(roomy_wait == 0.0);
  CHECK(wait > 0.0);
  for (const auto& e : tight.engines) {
    CHECK(e->kv_cache().num_used_blocks() == 0);
    CHECK(e->kv_cache().num_exports() == 0);
  }
  const Summary s = summarize(*tight.rec, 2, SloConfig{});
  CHECK(s.get("e2e_mean_s") > summarize(*roomy.rec, 2, SloConfig{}).get("e2e_mean_s"));
}

TEST_CASE("a decode pool that can never hold a sequence is a configuration error", "[pools]") {
  CHECK_THROWS_AS(run_pd(1, 1, shared_prompts(3, 10.0), 4), ConfigError);
}

TEST_CASE("a decode instance that holds the prefix receives only the missing blocks", "[pools]") {
  // One shared 128-token system prompt: after the first hand-off the decode
  // instance caches its 8 blocks, so later transfers skip them.
  const PdRun r = run_pd(1, 1, shared_prompts(30, 20.0, 1));
  int with_reuse = 0;
  const double per_token = static_cast<double>(test::micro_model(1000).kv_bytes_per_token(2));
  for (const RequestRecord& q : r.rec->requests()) {
    const int moved_tokens = static_cast<int>(q.transfer_bytes / per_token);
    CHECK(moved_tokens == q.prompt_tokens - q.reused_blocks * 16);
    if (q.reused_blocks > 0) ++with_reuse;
  }
  CHECK(with_reuse >= 25);
}

TEST_CASE("the KV link model", "[pools]") {
  KvLinkConfig link;
  link.bandwidth_gbps = 10;
  link.latency_s = 1e-3;
  // 1 GB over 10 GB/s: 0.1 s, plus latency.
  CHECK(kv_transfer_cost(link, 1e9, 1, 1, 32, 0.5).seconds == Approx(0.101));
  // Two GPUs on each side move half each in parallel; a TP 4 -> TP 2 pair has two streams.
  CHECK(kv_transfer_cost(link, 1e9, 2, 2, 32, 0.0).seconds == Approx(0.051));
  CHECK(kv_transfer_cost(link, 1e9, 4, 2, 32, 0.0).seconds == Approx(0.051));
  link.layerwise = true;
  // A 0.2 s prefill hides 31/32 of it, up to the last layer's share.
  CHECK(kv_transfer_cost(link, 1e9, 1, 1, 32, 0.2).seconds == Approx(0.001 + 0.1 / 32));
  // A short prefill hides only what it overlaps.
  CHECK(kv_transfer_cost(link, 1e9, 1, 1, 32, 0.032).seconds == Approx(0.001 + 0.1 - 0.032 * 31 / 32));
  // Layer-wise never costs more than the whole transfer.
  CHECK(kv_transfer_cost(link, 1e9, 1, 1, 32, 0.0).seconds == Approx(0.101));
}

TEST_CASE("a small disaggregated run reproduces its golden event log", "[pools][golden]") {
  // Regenerate deliberately (TESTBED_REGENERATE_GOLDEN=1) when a change is
  // meant to alter scheduling, and review the diff. Linear cost model: exact.
  KvLinkConfig link;
  link.bandwidth_gbps = 1;  // slow enough that transfers show in the times
  link.latency_s = 1e-4;
  const PdRun r = run_pd(1, 2, shared_prompts(6, 40.0, 2), 400, link);
  const std::string got = format_events(*r.rec);
  const std::string path = std::string(TESTBED_SOURCE_DIR) + "/tests/sim/golden/pd_events.csv";
  if (std::getenv("TESTBED_REGENERATE_GOLDEN")) std::ofstream(path) << got;
  std::ifstream in(path);
  REQUIRE(in);
  std::stringstream want;
  want << in.rdbuf();
  CHECK(got == want.str());
}

TEST_CASE("cancellations in a disaggregated fleet free both sides and conserve requests", "[pools][cancel]") {
  for (const std::string mode : {"time", "tokens"}) {
    INFO(mode);
    WorkloadConfig w = shared_prompts(300, 80.0);
    w.cancel_fraction = 0.5;
    w.cancel_after = mode;
    w.cancel_mean = mode == "time" ? 0.05 : 2;  // many leave around their first tokens, some during hand-off
    // A small decode pool, so hand-offs wait for room and some clients leave while they wait.
    const PdRun r = run_pd(2, 1, w, /*decode_blocks=*/40);
    CHECK(r.rec->num_arrived() == 300);
    CHECK(r.rec->num_finished() + r.rec->num_cancelled() == 300);
    CHECK(r.rec->num_cancelled() > 50);
    for (const auto& e : r.engines) {
      CHECK(e->kv_cache().num_used_blocks() == 0);
      CHECK(e->kv_cache().num_exports() == 0);
      CHECK(e->check_invariants().empty());
    }
  }
}
