// Speculative decoding with the n-gram proposer (engine/proposer.h) on the
// real CPU model: greedy outputs are identical with and without it for
// k = 1, 2, 4, 7, with prefix caching and chunked prefill on and under a KV
// budget that forces preemption; the cache invariants hold after every step;
// the proposer's lookup; the acceptance metrics.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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
                            spec, ProposerSetup{model.vocab_size, cfg.cache.block_size, num_blocks, cfg.max_model_len});
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
  p->propose(0, {5, 7, 8, 9, 4, 7, 8}, 3, out);
  CHECK(out == std::vector<int32_t>{9, 4, 7});
  // The latest earlier occurrence wins, and proposals stop at the sequence's end.
  out.clear();
  p->propose(0, {1, 2, 6, 1, 2, 3, 1, 2}, 4, out);
  CHECK(out == std::vector<int32_t>{3, 1, 2});
  // A repeating token proposes itself again.
  out.clear();
  p->propose(0, {4, 4, 4}, 2, out);
  CHECK(out == std::vector<int32_t>{4});
  // No earlier occurrence of any suffix of 1..3 tokens: nothing.
  out.clear();
  p->propose(0, {1, 2, 3, 4}, 3, out);
  CHECK(out.empty());
  // ngram_min = 2 ignores one-token matches.
  out.clear();
  ngram(3, 2, 3).method.create(ProposerSetup{100})->propose(0, {9, 1, 5, 1}, 3, out);
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

namespace {

// The micro model's config.json (support/engine_harness.h), and a smaller draft of it.
std::string write_json(const std::string& name, int layers, int hidden) {
  const std::string path = (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".json")).string();
  std::ofstream(path) << "{\"hidden_size\": " << hidden << ", \"intermediate_size\": " << hidden * 2
                      << ", \"num_hidden_layers\": " << layers
                      << ", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 512, "
                         "\"max_position_embeddings\": 1024, \"initializer_range\": 0.1}";
  return path;
}

SpecConfig draft(int k, const std::string& config, uint64_t seed) {
  SpecConfig spec;
  set_options(spec, {{"spec.method", "draft"},
                     {"spec.num_tokens", std::to_string(k)},
                     {"spec.draft_config", config},
                     {"spec.draft_seed", std::to_string(seed)}});
  spec.validate();
  return spec;
}

}  // namespace

TEST_CASE("a draft model proposes, its KV follows the target's accept and rollback", "[spec][proposer]") {
  // The target itself as the draft (same config, same weights): every draft is
  // the target's own greedy choice, so all are accepted; a smaller random
  // draft is mostly wrong. Either way the outputs are the target's.
  const std::string same = write_json("micro_same", 2, 64), small = write_json("micro_draft", 1, 32);
  for (const int blocks : {400, 24}) {
    const SpecRun plain = run(SpecConfig{}, blocks);
    for (const int k : {1, 3, 5}) {
      INFO("k = " << k << ", " << blocks << " blocks");
      const SpecRun perfect = run(draft(k, same, 5), blocks);
      CHECK(perfect.tokens == plain.tokens);
      CHECK(perfect.invariant_errors.empty());
      CHECK(perfect.summary.get("spec_acceptance_rate") == 1.0);
      const SpecRun weak = run(draft(k, small, 9), blocks);
      CHECK(weak.tokens == plain.tokens);
      CHECK(weak.drafted > 0);
      CHECK(weak.summary.get("spec_acceptance_rate") < perfect.summary.get("spec_acceptance_rate"));
    }
  }
  // A draft whose vocabulary differs is an error naming the key.
  const std::string other = (std::filesystem::temp_directory_path() / "micro_vocab.json").string();
  std::ofstream(other) << "{\"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1, "
                          "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 300, "
                          "\"max_position_embeddings\": 1024}";
  CHECK_THROWS_WITH(run(draft(2, other, 1), 400), Catch::Contains("spec.draft_config"));
  SpecConfig none;
  set_options(none, {{"spec.method", "draft"}});
  CHECK_THROWS_WITH(none.validate(), Catch::Contains("spec.draft_config"));
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
