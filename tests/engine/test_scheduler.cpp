// Scheduler: batch limits, chunking, preemption, conservation and prefix-hit
// accounting, driven by the simulated executor on a virtual clock.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "engine/engine.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "sim/cost_model.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

std::unique_ptr<Engine> sim_engine(const EngineConfig& cfg, int num_blocks, MetricsSink* sink, int vocab = 1000,
                                   SimSpeculation spec = {}) {
  CostModelConfig cm;
  ModelConfig model = micro_model(vocab);
  auto exec = std::make_unique<SimExecutor>(make_cost_model(cm, model), vocab, spec);
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
      // The step's KV tokens (summed by post-processing when the batch held
      // every running sequence) match a count over the running list.
      REQUIRE(rec.steps().back().kv_tokens == e.scheduler().num_running_tokens());
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

TEST_CASE("a step's KV tokens count the running sequences its batch left out", "[scheduler]") {
  // Proposed tokens ride along while the budget allows (8 tokens a step, 4
  // proposed per decoding sequence), so with several sequences decoding the
  // first ones' drafts leave the others out of the step. With one or two,
  // the batch holds every running sequence; post-processing sums the tokens
  // only then, and the record's count must be the running list's either way.
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = 16;
  cfg.scheduler.max_batch_tokens = 8;
  cfg.cache.block_size = 4;
  cfg.max_model_len = 1024;
  RunRecorder rec;
  SimSpeculation spec;
  spec.num_tokens = 4;
  spec.acceptance = 0.6;
  spec.seed = 3;
  auto engine = sim_engine(cfg, /*num_blocks=*/200, &rec, 1000, spec);
  Rng rng(5);
  std::vector<Request> reqs;
  for (int i = 0; i < 10; ++i) {
    Request r;
    r.id = i;
    r.arrival_s = i < 6 ? 0.0 : 1.0 + 0.5 * i;  // six at once, then one at a time
    r.prompt = random_tokens(rng, 5 + i, 1000);
    r.max_output_tokens = 12 + i % 3;
    reqs.push_back(r);
  }
  int whole = 0, partial = 0;
  run_virtual(*engine, reqs, 0.01, [&](Engine& e, const Batch& b) {
    REQUIRE(rec.steps().back().kv_tokens == e.scheduler().num_running_tokens());
    bool left_out = false;
    for (const Sequence* s : e.scheduler().live_sequences())
      if (s->status == SeqStatus::Running &&
          std::none_of(b.items.begin(), b.items.end(), [&](const ScheduledSeq& i) { return i.seq == s; }))
        left_out = true;
    ++(left_out ? partial : whole);
  });
  REQUIRE(rec.num_finished() == 10);
  CHECK(whole > 0);
  CHECK(partial > 0);
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

TEST_CASE("on_invalid rejects, truncates or refuses a request that can never run", "[scheduler][on_invalid]") {
  Request too_long;
  too_long.id = 7;
  too_long.prompt = std::vector<int32_t>(100, 1);
  for (int i = 0; i < 100; ++i) too_long.prompt[i] = i;  // the tail is what truncation keeps
  too_long.max_output_tokens = 10;
  Request fine = too_long;
  fine.id = 8;
  fine.prompt.resize(20);
  EngineConfig cfg;
  cfg.max_model_len = 64;

  cfg.on_invalid = "error";
  CHECK_THROWS_WITH(sim_engine(cfg, 100, nullptr)->add_request(too_long, 0), Catch::Contains("model.max_model_len"));

  cfg.on_invalid = "reject";
  RunRecorder rec;
  auto engine = sim_engine(cfg, 100, &rec);
  CHECK_FALSE(engine->add_request(too_long, 0));
  CHECK(engine->add_request(fine, 0));
  CHECK(engine->num_rejected() == 1);
  test::run_virtual(*engine, {});
  REQUIRE(rec.cancelled().size() == 1);
  CHECK(rec.cancelled()[0].id == 7);
  CHECK(rec.cancelled()[0].reason == CancelReason::Rejected);
  CHECK(rec.num_arrived() == 2);
  CHECK(rec.num_finished() == 1);
  CHECK(engine->kv_cache().num_used_blocks() == 0);
  CHECK(summarize(rec, 1, SloConfig{}).get("num_rejected") == 1);

  cfg.on_invalid = "truncate";
  RunRecorder with_tokens(true, true);
  auto cut = sim_engine(cfg, 100, &with_tokens);
  CHECK(cut->add_request(too_long, 0));
  test::run_virtual(*cut, {});
  REQUIRE(with_tokens.num_finished() == 1);
  CHECK(with_tokens.requests()[0].prompt_tokens == 64 - 10);  // the model's length less the output
  CHECK(with_tokens.requests()[0].output_tokens == 10);
  // Still impossible after truncation (no room for even the output): rejected.
  Request no_room = too_long;
  no_room.max_output_tokens = 64;
  CHECK_FALSE(cut->add_request(no_room, 0));
  CHECK(cut->num_rejected() == 1);
}

TEST_CASE("kv_reservation reserves each admitted sequence's length up front and paging wastes least",
          "[scheduler][reservation]") {
  // 40 requests of varied lengths arriving at once into a cache of 64 blocks of 8 tokens.
  const auto make_requests = [] {
    Rng rng(11);
    std::vector<Request> reqs;
    for (int i = 0; i < 40; ++i) {
      Request r;
      r.id = i;
      r.arrival_s = 0.0;
      r.prompt = random_tokens(rng, 8 + static_cast<int>(rng.below(40)), 1000);
      r.max_output_tokens = 1 + static_cast<int>(rng.below(30));
      reqs.push_back(r);
    }
    return reqs;
  };
  std::map<std::string, double> waste, batch;
  for (const std::string mode : {"paged", "oracle", "pow2", "max_length"}) {
    INFO(mode);
    EngineConfig cfg;
    cfg.scheduler.max_num_seqs = 64;
    cfg.scheduler.max_batch_tokens = 512;
    cfg.scheduler.kv_reservation = mode;
    cfg.cache.block_size = 8;
    cfg.cache.prefix_cache = false;
    cfg.max_model_len = 128;
    RunRecorder rec;
    auto engine = sim_engine(cfg, 64, &rec);
    const std::vector<Request> reqs = make_requests();
    run_virtual(*engine, reqs, 0.01, [&](Engine& e, const Batch&) {
      // Every running sequence holds at least its reserved length's blocks (never fewer).
      for (const Sequence* s : e.scheduler().live_sequences()) {
        if (s->status != SeqStatus::Running) continue;
        const int total = s->num_prompt_tokens() + s->max_output_tokens();
        int reserved = 0;
        if (mode == "oracle") reserved = total;
        if (mode == "max_length") reserved = 128;
        if (mode == "pow2") reserved = std::min(128, 1 << static_cast<int>(std::ceil(std::log2(total))));
        REQUIRE(static_cast<int>(s->block_table.size()) >= (reserved + 7) / 8);
      }
      REQUIRE(e.kv_cache().check_invariants(e.scheduler().live_sequences()).empty());
    });
    REQUIRE(rec.num_finished() == 40);  // reservation delays admission but loses nothing
    CHECK(engine->kv_cache().num_used_blocks() == 0);
    if (mode != "paged") CHECK(engine->scheduler().num_preemptions() == 0);  // reserved sequences never grow
    const Summary s = summarize(rec, 1, SloConfig{});
    waste[mode] = s.get("kv_waste_mean");
    batch[mode] = s.get("batch_size_mean");
  }
  // Paging wastes at most the last block's unused part; max-length reservation the most.
  CHECK(waste["paged"] < 7.0 / 8.0 * 0.5);
  CHECK(waste["paged"] < waste["oracle"]);
  CHECK(waste["oracle"] < waste["pow2"]);
  CHECK(waste["pow2"] < waste["max_length"]);
  CHECK(batch["paged"] > batch["max_length"]);
  CHECK(batch["max_length"] <= 64.0 / (128 / 8));  // four 128-token reservations fill the cache

  // A reservation the cache can never hold is refused at once, naming the key.
  EngineConfig cfg;
  cfg.scheduler.kv_reservation = "max_length";
  cfg.cache.block_size = 8;
  cfg.max_model_len = 1024;
  RunRecorder rec;
  auto engine = sim_engine(cfg, 64, &rec);
  Request r;
  r.id = 0;
  r.prompt = std::vector<int32_t>(10, 1);
  r.max_output_tokens = 5;
  CHECK_THROWS_WITH(engine->add_request(r, 0.0), Catch::Contains("cache.num_blocks"));
}

TEST_CASE("an admission watermark keeps room for running sequences to grow", "[scheduler][reservation]") {
  // Long prompts with long answers in a small cache: without headroom, admission
  // fills the cache and decoding sequences preempt each other.
  std::map<double, int64_t> preemptions;
  for (double watermark : {0.0, 0.1}) {
    EngineConfig cfg;
    cfg.scheduler.max_num_seqs = 64;
    cfg.scheduler.max_batch_tokens = 256;
    cfg.scheduler.admission_watermark = watermark;
    cfg.cache.block_size = 8;
    cfg.cache.prefix_cache = false;
    cfg.max_model_len = 256;
    RunRecorder rec;
    auto engine = sim_engine(cfg, 100, &rec);
    Rng rng(5);
    std::vector<Request> reqs;
    for (int i = 0; i < 40; ++i) {
      Request r;
      r.id = i;
      r.arrival_s = 0.002 * i;
      r.prompt = random_tokens(rng, 40 + static_cast<int>(rng.below(60)), 1000);
      r.max_output_tokens = 40 + static_cast<int>(rng.below(60));
      reqs.push_back(r);
    }
    run_virtual(*engine, reqs, 0.01, [&](Engine& e, const Batch&) {
      REQUIRE(e.kv_cache().check_invariants(e.scheduler().live_sequences()).empty());
    });
    REQUIRE(rec.num_finished() == 40);
    CHECK(engine->kv_cache().num_used_blocks() == 0);
    preemptions[watermark] = engine->scheduler().num_preemptions();
  }
  CHECK(preemptions[0.0] > 0);
  CHECK(preemptions[0.1] < preemptions[0.0]);
}

TEST_CASE("loading sequences ahead or not changes no step, token or record", "[scheduler][load_ahead]") {
  // set_load_ahead(false) (a lone simulated instance) only drops cache hints:
  // the same requests, with prefix hits and preemptions, give the same steps,
  // outputs, records and KV events either way.
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    EngineConfig cfg;
    cfg.scheduler.max_num_seqs = 24;
    cfg.scheduler.max_batch_tokens = 192;
    cfg.scheduler.chunk_size = 64;
    cfg.cache.block_size = 4;
    cfg.max_model_len = 1024;
    std::vector<Request> reqs;
    Rng rng(seed);
    const std::vector<int32_t> shared = random_tokens(rng, 40, 1000);
    for (int i = 0; i < 80; ++i) {
      Request r;
      r.id = i;
      r.arrival_s = 0.002 * i;
      r.prompt = shared;
      const std::vector<int32_t> own = random_tokens(rng, 1 + static_cast<int>(rng.below(60)), 1000);
      r.prompt.insert(r.prompt.end(), own.begin(), own.end());
      r.max_output_tokens = 1 + static_cast<int>(rng.below(40));
      reqs.push_back(r);
    }
    RunRecorder on(true, true), off(true, true);
    auto a = sim_engine(cfg, /*num_blocks=*/90, &on);  // small: preemptions and evictions
    auto b = sim_engine(cfg, /*num_blocks=*/90, &off);
    b->scheduler().set_load_ahead(false);
    std::vector<std::vector<std::pair<int64_t, int>>> steps_a, steps_b;
    auto log = [](std::vector<std::vector<std::pair<int64_t, int>>>& steps) {
      return [&steps](Engine&, const Batch& batch) {
        steps.emplace_back();
        for (const ScheduledSeq& item : batch.items) steps.back().emplace_back(item.seq->id(), item.num_new);
      };
    };
    run_virtual(*a, reqs, 0.01, log(steps_a));
    run_virtual(*b, reqs, 0.01, log(steps_b));
    INFO("seed " << seed);
    CHECK(steps_a == steps_b);
    CHECK(outputs_by_id(on) == outputs_by_id(off));
    REQUIRE(on.requests().size() == off.requests().size());
    for (size_t i = 0; i < on.requests().size(); ++i) {
      CHECK(on.requests()[i].id == off.requests()[i].id);
      CHECK(on.requests()[i].first_token_s == off.requests()[i].first_token_s);
      CHECK(on.requests()[i].cached_tokens == off.requests()[i].cached_tokens);
      CHECK(on.requests()[i].preemptions == off.requests()[i].preemptions);
    }
    CHECK(on.num_blocks_stored() == off.num_blocks_stored());
    CHECK(on.num_blocks_removed() == off.num_blocks_removed());
    CHECK(on.num_blocks_stored() > 0);
  }
}
