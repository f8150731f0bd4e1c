// Speculative decoding with the n-gram proposer (engine/proposer.h) on the
// real CPU model: greedy outputs are identical with and without it for
// k = 1, 2, 4, 7, with prefix caching and chunked prefill on and under a KV
// budget that forces preemption; the cache invariants hold after every step;
// the proposer's lookup; the acceptance metrics.
#include <catch2/catch.hpp>

#include "engine/common/option_table.h"
#include "engine/cpu_executor.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "engine/model/llama_weights.h"
#include "engine/proposer.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

SpecConfig ngram(int k, int min = 1, int max = 3) {
  SpecConfig spec;
  set_options(spec, {{"spec.method", "ngram"},
                     {"spec.num_tokens", std::to_string(k)},
                     {"spec.ngram_min", std::to_string(min)},
                     {"spec.ngram_max", std::to_string(max)}});
  spec.validate();
  return spec;
}

struct SpecRun {
  std::map<int64_t, std::vector<int32_t>> tokens;
  Summary summary;
  int64_t preemptions = 0, drafted = 0;
  std::string invariant_errors;
};

SpecRun run(const SpecConfig& spec, int num_blocks, double temperature = 0.0, int max_num_seqs = 6) {
  const ModelConfig model = micro_model();
  EngineConfig cfg;
  cfg.cache.block_size = 8;
  cfg.cache.prefix_cache = true;
  cfg.scheduler.max_num_seqs = max_num_seqs;
  cfg.scheduler.max_batch_tokens = 48;
  cfg.scheduler.chunked_prefill = true;
  cfg.scheduler.chunk_size = 16;
  cfg.max_model_len = 512;
  RunRecorder rec(true, true);
  auto exec = with_proposer(std::make_unique<CpuExecutor>(model, make_dummy_weights(model, 5), num_blocks,
                                                          cfg.cache.block_size, cfg.max_model_len),
                            spec, model.vocab_size);
  Engine engine(0, cfg, num_blocks, std::move(exec), &rec);
  SpecRun out;
  std::vector<Request> requests = shared_prefix_requests(8, 24, 6, 40, model.vocab_size, 3, 0.02);
  for (Request& r : requests) {
    r.sampling.temperature = static_cast<float>(temperature);
    r.sampling.top_k = temperature > 0 ? 20 : 0;
    r.sampling.seed = 17;
  }
  run_virtual(engine, requests, 0.01,
              [&](Engine& e, const Batch&) { out.invariant_errors += e.check_invariants(); });
  out.tokens = outputs_by_id(rec);
  out.summary = summarize(rec, 1, SloConfig{});
  for (const RequestRecord& r : rec.requests()) out.preemptions += r.preemptions, out.drafted += r.spec_drafted;
  return out;
}

}  // namespace

TEST_CASE("the n-gram proposer proposes what followed the longest earlier match", "[spec][proposer]") {
  auto p = ngram(3, 1, 3).method.create(ProposerSetup{100});
  std::vector<int32_t> out;
  // Suffix (7, 8) occurred at 1..2; what followed it: 9, 4, 7.
  p->propose({5, 7, 8, 9, 4, 7, 8}, 3, out);
  CHECK(out == std::vector<int32_t>{9, 4, 7});
  // The latest earlier occurrence wins, and proposals stop at the sequence's end.
  out.clear();
  p->propose({1, 2, 6, 1, 2, 3, 1, 2}, 4, out);
  CHECK(out == std::vector<int32_t>{3, 1, 2});
  // A repeating token proposes itself again.
  out.clear();
  p->propose({4, 4, 4}, 2, out);
  CHECK(out == std::vector<int32_t>{4});
  // No earlier occurrence of any suffix of 1..3 tokens: nothing.
  out.clear();
  p->propose({1, 2, 3, 4}, 3, out);
  CHECK(out.empty());
  // ngram_min = 2 ignores one-token matches.
  out.clear();
  ngram(3, 2, 3).method.create(ProposerSetup{100})->propose({9, 1, 5, 1}, 3, out);
  CHECK(out.empty());
}

TEST_CASE("greedy outputs are identical with and without the n-gram proposer", "[spec][proposer]") {
  for (const int blocks : {400, 24}) {  // 24 blocks of 8 for 8 sequences of ~75 tokens: preemption
    const SpecRun plain = run(SpecConfig{}, blocks);
    REQUIRE(plain.tokens.size() == 8);
    REQUIRE(plain.invariant_errors.empty());
    CHECK(!plain.summary.has("spec_acceptance_rate"));
    if (blocks == 24) CHECK(plain.preemptions > 0);
    for (const int k : {1, 2, 4, 7}) {
      INFO("k = " << k << ", " << blocks << " blocks");
      const SpecRun spec = run(ngram(k), blocks);
      CHECK(spec.tokens == plain.tokens);
      CHECK(spec.invariant_errors.empty());
      CHECK(spec.drafted > 0);
      const double rate = spec.summary.get("spec_acceptance_rate");
      CHECK(rate > 0);
      CHECK(rate <= 1);
      CHECK(spec.summary.get("spec_tokens_per_step") >= 1);
      CHECK(spec.summary.get("spec_tokens_per_step") <= k + 1);
      // Accepted drafts save steps.
      CHECK(spec.summary.get("num_steps") < plain.summary.get("num_steps"));
    }
  }
}

TEST_CASE("sampled outputs are identical with and without the n-gram proposer", "[spec][proposer]") {
  // The CPU executor verifies a draft by the target's own seeded draw at that
  // position, so a sampled run with proposals is the sampled run without them.
  const SpecRun plain = run(SpecConfig{}, 400, 0.9);
  const SpecRun spec = run(ngram(4), 400, 0.9);
  CHECK(spec.tokens == plain.tokens);
  CHECK(spec.drafted > 0);
  CHECK(spec.summary.get("spec_acceptance_rate") < run(ngram(4), 400).summary.get("spec_acceptance_rate"));
}

TEST_CASE("spec.max_batch_size turns speculation off in larger batches", "[spec][proposer]") {
  SpecConfig capped = ngram(4);
  capped.max_batch_size = 1;
  // All eight requests at once in batches of up to 6: steps of several sequences never draft.
  const SpecRun one_at_a_time = run(capped, 400, 0.0, 1);
  const SpecRun batched = run(capped, 400, 0.0, 6);
  CHECK(one_at_a_time.drafted > 0);
  CHECK(batched.drafted < one_at_a_time.drafted);
  CHECK(batched.tokens == one_at_a_time.tokens);
}

TEST_CASE("spec config errors name the key", "[spec][proposer]") {
  SpecConfig spec;
  spec.num_tokens = 0;
  CHECK_THROWS_WITH(spec.validate(), Catch::Contains("spec.num_tokens"));
  SpecConfig bad;
  set_options(bad, {{"spec.method", "ngram"}, {"spec.ngram_min", "3"}, {"spec.ngram_max", "2"}});
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("spec.ngram_max"));
  SpecConfig unknown;
  set_options(unknown, {{"spec.method", "oracle"}});
  CHECK_THROWS_WITH(unknown.validate(), Catch::Contains("spec.method"));
}
