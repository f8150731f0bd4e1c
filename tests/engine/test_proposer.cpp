// Speculative decoding (engine/proposer.h) on the real CPU model, with the
// n-gram and draft-model proposers and both verifications: greedy outputs are
// identical with and without it for k = 1, 2, 4, 7, with prefix caching and
// chunked prefill on and under a KV budget that forces preemption; the cache
// invariants hold after every step; with rejection sampling, sampled outputs
// follow the target's distribution (chi-square against the exact one, and a
// broken verifier that the test rejects); the proposer's lookup; the
// acceptance metrics.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "engine/common/option_table.h"
#include "engine/cpu_executor.h"
#include "engine/kv_cache_manager.h"
#include "engine/sampler.h"
#include "kernels/spec/spec_rng.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "engine/model/llama_weights.h"
#include "engine/proposer.h"
#include "support/chi_square.h"
#include "support/engine_harness.h"
#include "support/scratch.h"

using namespace testbed;
using namespace testbed::test;

namespace {

SpecConfig ngram(int k, int min = 1, int max = 3, const std::string& verify = "match") {
  SpecConfig spec;
  set_options(spec, {{"spec.method", "ngram"},
                     {"spec.num_tokens", std::to_string(k)},
                     {"spec.ngram_min", std::to_string(min)},
                     {"spec.ngram_max", std::to_string(max)},
                     {"spec.verify", verify}});
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
      for (const char* verify : {"match", "rejection"}) {
        INFO("k = " << k << ", " << blocks << " blocks, spec.verify = " << verify);
        const SpecRun spec = run(ngram(k, 1, 3, verify), blocks);
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
  const std::string path = (testbed_test::scratch_root("testbed_proposer") / (name + ".json")).string();
  std::ofstream(path) << "{\"hidden_size\": " << hidden << ", \"intermediate_size\": " << hidden * 2
                      << ", \"num_hidden_layers\": " << layers
                      << ", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 512, "
                         "\"max_position_embeddings\": 1024, \"initializer_range\": 0.1}";
  return path;
}

SpecConfig draft(int k, const std::string& config, uint64_t seed, const std::string& verify = "match") {
  SpecConfig spec;
  set_options(spec, {{"spec.method", "draft"},
                     {"spec.num_tokens", std::to_string(k)},
                     {"spec.draft_config", config},
                     {"spec.draft_seed", std::to_string(seed)},
                     {"spec.verify", verify}});
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
      // Rejection sampling of greedy drafts against a greedy target is greedy verification.
      const SpecRun weak_rs = run(draft(k, small, 9, "rejection"), blocks);
      CHECK(weak_rs.tokens == plain.tokens);
      CHECK(weak_rs.invariant_errors.empty());
      CHECK(weak_rs.summary.get("spec_acceptance_rate") == weak.summary.get("spec_acceptance_rate"));
    }
  }
  // A draft whose vocabulary differs is an error naming the key.
  const std::string other = (testbed_test::scratch_root("testbed_proposer") / "micro_vocab.json").string();
  std::ofstream(other) << "{\"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1, "
                          "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 300, "
                          "\"max_position_embeddings\": 1024}";
  CHECK_THROWS_WITH(run(draft(2, other, 1), 400), Catch::Contains("spec.draft_config"));
  SpecConfig none;
  set_options(none, {{"spec.method", "draft"}});
  CHECK_THROWS_WITH(none.validate(), Catch::Contains("spec.draft_config"));
}

TEST_CASE("rejection sampling accepts every draft of a draft that is the target", "[spec][proposer]") {
  // Sampled requests (T = 0.9, top-k 20). Under match, a draft is kept only
  // when it equals the target's own draw; under rejection sampling a draft
  // drawn from q = p is always kept (u * q(x) < p(x)), the property that makes
  // a good draft pay at any temperature.
  const std::string same = write_json("micro_same_rs", 2, 64);
  const SpecRun matched = run(draft(3, same, 5), 400, 0.9);
  const SpecRun rejected = run(draft(3, same, 5, "rejection"), 400, 0.9);
  CHECK(rejected.invariant_errors.empty());
  CHECK(rejected.drafted > 0);
  CHECK(rejected.summary.get("spec_acceptance_rate") == 1.0);
  CHECK(matched.summary.get("spec_acceptance_rate") < 0.9);
  // Sampled outputs under rejection are the target's in distribution, not draw for draw.
  CHECK(rejected.tokens != run(SpecConfig{}, 400, 0.9).tokens);
}

namespace {

// The target's sampling distribution after `context` (micro model, dummy seed 5).
std::vector<float> next_distribution(CpuExecutor& exec, KvCacheManager& kv, const std::vector<int32_t>& context,
                                     const SamplingParams& sp) {
  Request r;
  r.prompt = context;
  r.sampling = sp;
  Sequence seq(std::move(r));
  REQUIRE(kv.allocate(seq, static_cast<int>(context.size())));
  Batch b;
  b.add(&seq, 0, static_cast<int>(context.size()));
  b.want_probs = true;
  const StepResult res = exec.execute(b);
  kv.free(seq);
  return res.probs;
}

// Requests with one prompt, each a different id (so independent seeded draws),
// through an engine whose executor is `exec`; the first three output tokens of each.
std::vector<std::array<int32_t, 3>> sample_many(std::unique_ptr<Executor> exec, const std::vector<int32_t>& prompt,
                                                const SamplingParams& sp, int n, int num_blocks, int* drafted) {
  EngineConfig cfg;
  cfg.cache.block_size = 8;
  cfg.cache.prefix_cache = true;
  cfg.scheduler.max_num_seqs = 64;
  cfg.scheduler.max_batch_tokens = 512;
  cfg.max_model_len = 64;
  RunRecorder rec(true, true);
  Engine engine(0, cfg, num_blocks, std::move(exec), &rec);
  std::vector<Request> requests(n);
  for (int i = 0; i < n; ++i) {
    requests[i].id = i;
    requests[i].prompt = prompt;
    requests[i].max_output_tokens = 4;  // k = 2 drafts after the first token
    requests[i].sampling = sp;
  }
  run_virtual(engine, requests, 0.01);
  std::vector<std::array<int32_t, 3>> out;
  *drafted = 0;
  for (const RequestRecord& r : rec.requests()) *drafted += r.spec_drafted;
  for (const auto& [id, t] : outputs_by_id(rec)) {
    REQUIRE(t.size() == 4);
    out.push_back({t[0], t[1], t[2]});
  }
  return out;
}

}  // namespace

TEST_CASE("with rejection sampling, sampled outputs follow the target's distribution", "[spec][proposer]") {
  // 3,000 requests of one 10-token prompt, T = 1 with top-k 4, a weak draft
  // (1 layer, other weights) proposing k = 2 tokens sampled from its q. The
  // exact target distributions come from the model itself: of the first two
  // output tokens jointly (up to 16 cells) and of the third token's marginal
  // (summed over the 16 prefixes). Each is a chi-square test at significance
  // 0.001. Power: a verifier that keeps every draft emits the draft's tokens,
  // and must fail the same tests.
  const ModelConfig model = micro_model();
  const int blocks = 512, V = model.vocab_size, n = 3000;
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 4;
  sp.seed = 23;
  const std::vector<int32_t> prompt{7, 99, 3, 250, 31, 8, 400, 12, 77, 5};
  const std::string small = write_json("micro_draft_chi", 1, 32);
  auto speculating = [&](VerifyFn verify) {
    auto target = std::make_unique<CpuExecutor>(model, make_dummy_weights(model, 5), blocks, 8, 64);
    SpecConfig spec = draft(2, small, 9, "rejection");
    return std::make_unique<SpeculativeExecutor>(std::move(target),
                                                 spec.method.create(ProposerSetup{V, 8, blocks, 64}), 2, 0, true,
                                                 std::move(verify));
  };
  int drafted = 0, drafted_broken = 0;
  const auto good = sample_many(speculating({}), prompt, sp, n, blocks, &drafted);
  const auto broken = sample_many(
      speculating([](const VerifyBatch& b, const VerifyOutput& o) {
        verify_rejection_ref(b, o);  // for the bonus draw, then: keep every draft
        for (int i = 0; i < b.num_seqs; ++i) {
          const int k = b.draft_offsets[i + 1] - b.draft_offsets[i];
          if (o.num_accepted[i] == k) continue;
          for (int j = 0; j < k; ++j) o.out_tokens[b.draft_offsets[i] + i + j] = b.draft_tokens[b.draft_offsets[i] + j];
          const double u = spec_uniform(b.seeds[i], b.request_ids[i], b.positions[i] + k, kSpecSample);
          o.out_tokens[b.draft_offsets[i] + i + k] = sample_from_probs_ref(
              b.target_probs + static_cast<size_t>(b.draft_offsets[i] + i + k) * b.vocab, b.vocab, u);
          o.num_accepted[i] = k;
        }
      }),
      prompt, sp, n, blocks, &drafted_broken);
  REQUIRE(good.size() == static_cast<size_t>(n));
  CHECK(drafted > n);  // nearly every request verified drafts

  // The exact distributions.
  CpuExecutor exec(model, make_dummy_weights(model, 5), blocks, 8, 64);
  KvCacheManager kv(blocks, 8, false);
  const std::vector<float> p0 = next_distribution(exec, kv, prompt, sp);
  std::vector<float> joint(static_cast<size_t>(V) * V, 0.0f), third(V, 0.0f);
  for (int a = 0; a < V; ++a) {
    if (p0[a] == 0) continue;
    std::vector<int32_t> c = prompt;
    c.push_back(a);
    const std::vector<float> p1 = next_distribution(exec, kv, c, sp);
    for (int b = 0; b < V; ++b) {
      if (p1[b] == 0) continue;
      joint[static_cast<size_t>(a) * V + b] = p0[a] * p1[b];
      c.push_back(b);
      const std::vector<float> p2 = next_distribution(exec, kv, c, sp);
      c.pop_back();
      for (int t = 0; t < V; ++t) third[t] += p0[a] * p1[b] * p2[t];
    }
  }
  auto counts = [&](const std::vector<std::array<int32_t, 3>>& s) {
    std::vector<int> pair(static_cast<size_t>(V) * V, 0), last(V, 0);
    for (const auto& t : s) ++pair[static_cast<size_t>(t[0]) * V + t[1]], ++last[t[2]];
    return std::make_pair(pair, last);
  };
  const auto [pair, last] = counts(good);
  const auto [pair_b, last_b] = counts(broken);
  int dof = 0;
  const double stat_pair = chi_square(pair, joint.data(), n, &dof);
  INFO("first two tokens: chi-square " << stat_pair << ", dof " << dof);
  REQUIRE(dof >= 3);
  CHECK(stat_pair < chi_square_critical_999(dof));
  CHECK(chi_square(pair_b, joint.data(), n, &dof) > chi_square_critical_999(dof));
  const double stat_last = chi_square(last, third.data(), n, &dof);
  INFO("third token: chi-square " << stat_last << ", dof " << dof);
  REQUIRE(dof >= 3);
  CHECK(stat_last < chi_square_critical_999(dof));
  CHECK(chi_square(last_b, third.data(), n, &dof) > chi_square_critical_999(dof));
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
  SpecConfig verify;
  set_options(verify, {{"spec.method", "ngram"}, {"spec.verify", "typical"}});
  CHECK_THROWS_WITH(verify.validate(), Catch::Contains("spec.verify"));
  SpecConfig lone;
  set_options(lone, {{"spec.verify", "rejection"}});
  CHECK_THROWS_WITH(lone.validate(), Catch::Contains("spec.verify"));
}
