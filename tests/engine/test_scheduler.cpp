// Scheduler: batch limits, chunking, preemption, conservation and prefix-hit
// accounting, driven by the simulated executor on a virtual clock.
#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "engine/metrics/run_recorder.h"
#include "sim/cost_model.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

std::unique_ptr<Engine> sim_engine(const EngineConfig& cfg, int num_blocks, MetricsSink* sink, int vocab = 1000) {
  CostModelConfig cm;
  ModelConfig model = micro_model(vocab);
  auto exec = std::make_unique<SimExecutor>(make_cost_model(cm, model), vocab);
  return std::make_unique<Engine>(0, cfg, num_blocks, std::move(exec), sink);
}

}  // namespace

TEST_CASE("every step respects max_num_seqs and max_batch_tokens and chunk_size", "[scheduler]") {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Rng rng(seed);
    EngineConfig cfg;
    cfg.scheduler.max_num_seqs = 1 + static_cast<int>(rng.below(16));
    cfg.scheduler.max_batch_tokens = 16 + static_cast<int>(rng.below(256));
    cfg.scheduler.chunked_prefill = rng.below(2) == 0;
    cfg.scheduler.chunk_size = 1 + static_cast<int>(rng.below(128));
    cfg.cache.block_size = 1 + static_cast<int>(rng.below(16));
    cfg.cache.prefix_cache = rng.below(2) == 0;
    cfg.max_model_len = 1024;
    const int max_len = cfg.scheduler.chunked_prefill ? 300 : cfg.scheduler.max_batch_tokens;
    const int num_blocks = (max_len + cfg.cache.block_size - 1) / cfg.cache.block_size + static_cast<int>(rng.below(60));
    RunRecorder rec;
    auto engine = sim_engine(cfg, num_blocks, &rec);
    std::vector<Request> reqs;
    for (int i = 0; i < 60; ++i) {
      Request r;
      r.id = i;
      r.arrival_s = 0.003 * i;
      const int out = 1 + static_cast<int>(rng.below(std::min(20, max_len - 1)));
      const int prompt = 1 + static_cast<int>(rng.below(max_len - out));
      r.prompt = random_tokens(rng, prompt, 1000);
      r.max_output_tokens = out;
      reqs.push_back(r);
    }
    INFO("seed " << seed);
    run_virtual(*engine, reqs, 0.01, [&](Engine& e, const Batch& b) {
      REQUIRE(b.num_seqs() <= cfg.scheduler.max_num_seqs);
      REQUIRE(b.num_tokens() <= cfg.scheduler.max_batch_tokens);
      for (const ScheduledSeq& item : b.items) {
        if (item.num_new > 1 && cfg.scheduler.chunked_prefill) REQUIRE(item.num_new <= cfg.scheduler.chunk_size);
        if (!cfg.scheduler.chunked_prefill && !item.is_decode())  // unchunked prompts run whole (then sample)
          REQUIRE(item.num_computed + item.num_new + 1 == item.seq->num_tokens());
      }
      REQUIRE(e.kv_cache().check_invariants(e.scheduler().live_sequences()).empty());
    });
    // Conservation: every request finished with its output length; nothing leaked.
    REQUIRE(rec.num_finished() == 60);
    for (const RequestRecord& r : rec.requests()) CHECK(r.output_tokens == reqs[r.id].max_output_tokens);
    CHECK(engine->kv_cache().num_used_blocks() == 0);
    CHECK(engine->kv_cache().check_invariants({}).empty());
  }
}

TEST_CASE("a small KV cache forces preemption and every request still finishes", "[scheduler][preemption]") {
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = 16;
  cfg.scheduler.max_batch_tokens = 256;
  cfg.cache.block_size = 4;
  cfg.max_model_len = 1024;
  RunRecorder rec;
  auto engine = sim_engine(cfg, /*num_blocks=*/24, &rec);
  Rng rng(3);
  std::vector<Request> reqs;
  for (int i = 0; i < 12; ++i) {
    Request r;
    r.id = i;
    r.prompt = random_tokens(rng, 20, 1000);
    r.max_output_tokens = 30;
    reqs.push_back(r);
  }
  run_virtual(*engine, reqs, 0.01, [&](Engine& e, const Batch&) {
    REQUIRE(e.kv_cache().check_invariants(e.scheduler().live_sequences()).empty());
  });
  CHECK(engine->scheduler().num_preemptions() > 0);
  REQUIRE(rec.num_finished() == 12);
  int preempted = 0;
  for (const RequestRecord& r : rec.requests()) {
    CHECK(r.output_tokens == 30);
    preempted += r.preemptions;
  }
  CHECK(preempted == engine->scheduler().num_preemptions());
  CHECK(engine->kv_cache().num_used_blocks() == 0);
}

TEST_CASE("FCFS preempts the newest running sequence first", "[scheduler][preemption]") {
  EngineConfig cfg;
  cfg.scheduler.max_batch_tokens = 64;
  cfg.cache.block_size = 4;
  cfg.cache.prefix_cache = false;
  cfg.max_model_len = 1024;
  auto engine = sim_engine(cfg, /*num_blocks=*/6, nullptr);
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.id = i;
    r.prompt = std::vector<int32_t>(7, i + 1);  // two blocks each, then a third at token 9
    r.max_output_tokens = 10;
    engine->add_request(r, 0.0);
  }
  StepPlan p = engine->begin_step(0.0);
  REQUIRE(p.batch.num_seqs() == 3);
  engine->end_step(p, engine->executor().execute(p.batch), 0.01);
  p = engine->begin_step(0.01);  // three decodes fill the 6 blocks exactly
  engine->end_step(p, engine->executor().execute(p.batch), 0.02);
  p = engine->begin_step(0.02);  // the next tokens need new blocks: request 2 must go
  REQUIRE(p.batch.preempted.size() == 1);
  CHECK(p.batch.preempted[0] == 2);
  CHECK(p.batch.num_seqs() == 2);
}

TEST_CASE("prefix hits match the block rule", "[scheduler][prefix_cache]") {
  // N requests share a P-token prefix; each arrives after the previous one finished
  // its prompt, so request i > 0 finds floor(P / block) blocks, capped so that
  // one prompt token is always computed.
  for (int block_size : {4, 16}) {
    for (int prefix : {0, 10, 48, 64, 100}) {
      for (int unique : {0, 1, 7}) {
        if (prefix + unique == 0) continue;
        EngineConfig cfg;
        cfg.cache.block_size = block_size;
        cfg.max_model_len = 1024;
        RunRecorder rec;
        auto engine = sim_engine(cfg, 512, &rec);
        Rng rng(prefix * 31 + unique);
        const std::vector<int32_t> shared = random_tokens(rng, prefix, 1000);
        std::vector<Request> reqs;
        for (int i = 0; i < 5; ++i) {
          Request r;
          r.id = i;
          r.arrival_s = i * 10.0;  // far apart: the previous request has finished
          r.prompt.insert(r.prompt.end(), shared.begin(), shared.end());
          const auto tail = random_tokens(rng, unique, 1000);
          r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
          r.max_output_tokens = 3;
          reqs.push_back(r);
        }
        run_virtual(*engine, reqs);
        const int len = prefix + unique;
        const int expected = std::min(prefix / block_size, (len - 1) / block_size) * block_size;
        INFO("block " << block_size << " prefix " << prefix << " unique " << unique);
        for (const RequestRecord& r : rec.requests()) {
          if (r.id == 0) {
            CHECK(r.cached_tokens == 0);
          } else if (unique == 0) {
            // Identical prompts: the earlier request's output-free blocks are all cached.
            CHECK(r.cached_tokens == ((len - 1) / block_size) * block_size);
          } else {
            CHECK(r.cached_tokens == expected);
          }
        }
      }
    }
  }
}

TEST_CASE("prefix cache off never reports hits", "[scheduler][prefix_cache]") {
  EngineConfig cfg;
  cfg.cache.prefix_cache = false;
  cfg.max_model_len = 1024;
  RunRecorder rec;
  auto engine = sim_engine(cfg, 256, &rec);
  run_virtual(*engine, shared_prefix_requests(6, 64, 8, 4, 1000, 1, 1.0));
  for (const RequestRecord& r : rec.requests()) CHECK(r.cached_tokens == 0);
  CHECK(rec.num_blocks_stored() == 0);
}

TEST_CASE("requests that can never run are rejected with the limiting key", "[scheduler]") {
  EngineConfig cfg;
  cfg.max_model_len = 64;
  cfg.scheduler.chunked_prefill = false;
  cfg.scheduler.max_batch_tokens = 32;
  auto engine = sim_engine(cfg, 100, nullptr);
  Request r;
  r.prompt = std::vector<int32_t>(60, 1);
  r.max_output_tokens = 10;
  CHECK_THROWS_WITH(engine->add_request(r, 0), Catch::Contains("model.max_model_len"));
  r.prompt.resize(30);
  CHECK_THROWS_WITH(engine->add_request(r, 0), Catch::Contains("scheduler.max_batch_tokens"));
  auto small = sim_engine(EngineConfig{}, 2, nullptr);
  r.prompt.resize(40);
  CHECK_THROWS_WITH(small->add_request(r, 0), Catch::Contains("cache.num_blocks"));
}
