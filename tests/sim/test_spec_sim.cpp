// Speculation in the simulator (sim/sim_executor.h, spec.acceptance =
// fixed:A): outputs equal plain decoding's; with A = 0 the steps are plain
// decoding's; with A = 1 a sequence advances k + 1 tokens per step; in
// between, tokens per step and the share of drafts accepted follow the
// closed forms (1 - A^(k+1)) / (1 - A) and (A + ... + A^k) / k.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/common/option_table.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "sim/cost_model.h"
#include "sim/hardware_spec.h"
#include "sim/memory_planner.h"
#include "sim/simulated_driver.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"
#include "traces/workload.h"

using namespace testbed;

namespace {

struct SimRun {
  std::map<int64_t, std::vector<int32_t>> tokens;
  Summary summary;
};

SimRun simulate(int k, double acceptance, int output_tokens = 64) {
  const ModelConfig model = test::micro_model(1000);
  CostModelConfig cm;
  set_options(cm, {{"cost_model.prefill_token_s", "2e-4"}, {"cost_model.decode_seq_s", "1e-4"}});
  EngineConfig cfg;
  cfg.max_model_len = 1024;
  cfg.scheduler.max_batch_tokens = 4096;  // room for every draft: drafts never displace prompt tokens
  SimSpeculation spec;
  if (acceptance >= 0) spec = SimSpeculation{k, 0, acceptance, 9, nullptr, nullptr};
  RunRecorder rec(true, true);
  Engine engine(0, cfg, 2000, std::make_unique<SimExecutor>(make_cost_model(cm, model), 1000, spec), &rec);
  WorkloadConfig w;
  w.num_requests = 150;
  w.rate = 20;
  w.output_tokens = output_tokens;
  w.seed = 4;
  set_options(w, {{"workload.system_prompt_tokens", "64"}, {"workload.user_tokens", "32"}});
  WorkloadContext ctx;
  ctx.vocab_size = 1000;
  auto source = make_workload(w, ctx);
  run_simulated(engine, *source, nullptr);
  return SimRun{test::outputs_by_id(rec), summarize(rec, 1, SloConfig{})};
}

}  // namespace

TEST_CASE("simulated speculation keeps plain decoding's outputs", "[spec][sim]") {
  const SimRun plain = simulate(0, -1);
  REQUIRE(plain.tokens.size() == 150);
  for (const double a : {0.0, 0.5, 1.0}) {
    INFO("acceptance " << a);
    CHECK(simulate(4, a).tokens == plain.tokens);
  }
}

TEST_CASE("with acceptance 0 the steps are plain decoding's, with 1 a sequence advances k + 1 tokens a step", "[spec][sim]") {
  const SimRun plain = simulate(0, -1);
  const SimRun none = simulate(4, 0.0);
  CHECK(none.summary.get("num_steps") == plain.summary.get("num_steps"));
  CHECK(none.summary.get("spec_acceptance_rate") == 0.0);
  CHECK(none.summary.get("spec_tokens_per_step") == 1.0);
  for (const int k : {1, 3, 7}) {
    INFO("k = " << k);
    const SimRun all = simulate(k, 1.0);
    CHECK(all.summary.get("spec_acceptance_rate") == 1.0);
    // 63 tokens after the first: ceil(63 / (k + 1)) decode steps each, the last one short.
    const double steps = std::ceil(63.0 / (k + 1));
    CHECK(all.summary.get("spec_tokens_per_step") == Approx(63.0 / steps));
    CHECK(all.summary.get("tpot_mean_s") < plain.summary.get("tpot_mean_s") / (k + 1) * 1.6);
  }
}

TEST_CASE("tokens per step and acceptance follow the closed forms", "[spec][sim]") {
  for (const auto& [k, a] : std::vector<std::pair<int, double>>{{2, 0.6}, {4, 0.8}, {7, 0.5}}) {
    INFO("k = " << k << ", acceptance " << a);
    const SimRun r = simulate(k, a, 400);  // long outputs: the cap at the last tokens hardly matters
    double sum = 0;
    for (int j = 1; j <= k; ++j) sum += std::pow(a, j);
    CHECK(r.summary.get("spec_tokens_per_step") == Approx((1 - std::pow(a, k + 1)) / (1 - a)).epsilon(0.02));
    CHECK(r.summary.get("spec_acceptance_rate") == Approx(sum / k).epsilon(0.03));
  }
}

TEST_CASE("a simulated draft model costs KV blocks and step time, never tokens", "[spec][sim]") {
  const HardwareSpec h100 = HardwareSpec::from_ini_file(std::string(TESTBED_SOURCE_DIR) + "/experiments/hardware/h100-sxm.ini");
  const ModelConfig target = ModelConfig::from_json_file(std::string(TESTBED_SOURCE_DIR) + "/experiments/models/llama-3.1-8b.json");
  const ModelConfig draft = ModelConfig::from_json_file(std::string(TESTBED_SOURCE_DIR) + "/experiments/models/llama-3.2-1b.json");
  const int alone = kv_blocks_from_memory(h100, target, 16, 0.9, 1);
  const int shared = kv_blocks_from_memory(h100, target, 16, 0.9, 1, &draft);
  // The draft's weights leave the budget, and each block also holds the draft's K/V.
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double budget = h100.memory_bytes() * 0.9 - h100.reserve_gib * gib - weight_bytes_per_gpu(target, 1) -
                        weight_bytes_per_gpu(draft, 1);
  CHECK(shared == static_cast<int>(budget / (16 * (kv_bytes_per_token_per_gpu(target, 1) + kv_bytes_per_token_per_gpu(draft, 1)))));
  CHECK(shared < alone);

  // The draft's steps add to the step time; the tokens stay the same.
  const ModelConfig model = test::micro_model(1000);
  CostModelConfig cm;
  set_options(cm, {{"cost_model.prefill_token_s", "2e-4"}, {"cost_model.decode_seq_s", "1e-4"}});
  const std::shared_ptr<const CostModel> cost = make_cost_model(cm, model);
  const auto run = [&](bool with_draft) {
    SimSpeculation spec{4, 0, 0.7, 9, nullptr, nullptr};
    if (with_draft) spec.draft_cost_model = cost;  // a draft as costly as the target: the worst case
    EngineConfig cfg;
    cfg.max_model_len = 1024;
    cfg.scheduler.max_batch_tokens = 4096;
    RunRecorder rec(true, true);
    Engine engine(0, cfg, 2000, std::make_unique<SimExecutor>(cost, 1000, spec), &rec);
    WorkloadConfig w;
    w.num_requests = 40;
    w.rate = 20;
    w.output_tokens = 64;
    w.seed = 4;
    set_options(w, {{"workload.system_prompt_tokens", "64"}, {"workload.user_tokens", "32"}});
    WorkloadContext ctx;
    ctx.vocab_size = 1000;
    auto source = make_workload(w, ctx);
    run_simulated(engine, *source, nullptr);
    return SimRun{test::outputs_by_id(rec), summarize(rec, 1, SloConfig{})};
  };
  const SimRun free_drafts = run(false), paid = run(true);
  CHECK(paid.tokens == free_drafts.tokens);
  CHECK(paid.summary.get("tpot_mean_s") > free_drafts.summary.get("tpot_mean_s") * 1.5);
}
