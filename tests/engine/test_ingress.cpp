// The ingress cache on the wall clock (engine/ingress.h) and the model
// embedding it looks up with (Executor::embed, CpuExecutor's mean-pooled
// final hidden states).
//   build-cpu/tests/test_engine "[ingress]"
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>

#include "engine/common/config_error.h"
#include "engine/cpu_executor.h"
#include "engine/driver.h"
#include "engine/engine.h"
#include "engine/ingress.h"
#include "engine/proposer.h"
#include "engine/sequence.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

std::unique_ptr<CpuExecutor> micro_executor(const ModelConfig& model, int num_blocks = 64, int block_size = 8) {
  return std::make_unique<CpuExecutor>(model, make_dummy_weights(model, 7), num_blocks, block_size, 256);
}

// The last position's logits of a plain prefill of `prompt` (the engine's paged path).
std::vector<float> prefill_logits(const ModelConfig& model, const std::vector<int32_t>& prompt) {
  auto exec = micro_executor(model);
  KvCacheManager kv(64, 8, false);
  Request r;
  r.prompt = prompt;
  Sequence seq(std::move(r));
  REQUIRE(kv.allocate(seq, static_cast<int>(prompt.size())));
  Batch b;
  b.add(&seq, 0, static_cast<int>(prompt.size()));
  exec->execute(b);
  return exec->last_logits();
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// A RunRecorder that also logs, in order, each lookup's outcome (an engine
// arrival is a miss, a cache answer a hit) and each finish.
class LoggingRecorder : public RunRecorder {
 public:
  struct Event {
    char kind;  // 'm' miss, 'h' hit, 'f' finish
    int64_t id;
  };
  LoggingRecorder() : RunRecorder(false) {}
  void on_arrival(int instance, const Sequence& seq, double t) override {
    log.push_back({'m', seq.id()});
    RunRecorder::on_arrival(instance, seq, t);
  }
  void on_finish(int instance, const Sequence& seq, double t) override {
    log.push_back({'f', seq.id()});
    RunRecorder::on_finish(instance, seq, t);
  }
  void on_cache_answer(const Request& q, double t, bool semantic, bool correct) override {
    log.push_back({'h', q.id});
    CHECK_FALSE(semantic);  // tau = 1: exact only
    CHECK(correct);
    RunRecorder::on_cache_answer(q, t, semantic, correct);
  }
  std::vector<Event> log;
};

// 12 distinct prompts, then repeats of them at later positions (ids 12..): some
// come while their first copy still runs, some after it finished.
std::vector<Request> requests_with_repeats(int vocab) {
  Rng rng(11);
  std::vector<Request> out;
  for (int i = 0; i < 12; ++i) {
    Request r;
    r.id = i;
    r.prompt = random_tokens(rng, 6 + static_cast<int>(rng.below(10)), vocab);
    r.max_output_tokens = 3 + static_cast<int>(rng.below(4));
    r.intent = i;
    out.push_back(std::move(r));
  }
  for (int copy : {0, 1, 0, 5, 2, 9, 11, 5, 3, 0, 7, 11}) {
    Request r = out[copy];
    r.id = static_cast<int64_t>(out.size());
    out.push_back(std::move(r));
  }
  return out;
}

// Every lookup hit exactly when a request with its prompt had finished in the engine before it.
void check_hits_follow_finishes(const LoggingRecorder& rec, const std::vector<Request>& reqs, int64_t* num_hits) {
  std::set<std::vector<int32_t>> answered;  // prompts finished so far
  std::map<int64_t, const Request*> by_id;
  for (const Request& r : reqs) by_id[r.id] = &r;
  *num_hits = 0;
  for (const LoggingRecorder::Event& e : rec.log) {
    const std::vector<int32_t>& prompt = by_id.at(e.id)->prompt;
    if (e.kind == 'f') answered.insert(prompt);
    if (e.kind == 'h') ++*num_hits;
    if (e.kind != 'f') {
      INFO("request " << e.id << (e.kind == 'h' ? " hit" : " missed"));
      CHECK((e.kind == 'h') == (answered.count(prompt) > 0));
    }
  }
}

EngineConfig tiny_engine_config() {
  EngineConfig cfg;
  cfg.cache.block_size = 16;
  cfg.cache.prefix_cache = false;
  cfg.scheduler.max_num_seqs = 2;
  cfg.scheduler.max_batch_tokens = 256;
  cfg.max_model_len = 256;
  return cfg;
}

// The tiny model with dummy weights on a CPU engine of 64 blocks, reporting to `sink`.
std::unique_ptr<Engine> tiny_cpu_engine(const ModelConfig& model, MetricsSink* sink) {
  const EngineConfig cfg = tiny_engine_config();
  const int blocks = 64;
  return std::make_unique<Engine>(
      0, cfg, blocks, std::make_unique<CpuExecutor>(model, make_dummy_weights(model, 1), blocks, 16, cfg.max_model_len),
      sink);
}

}  // namespace

TEST_CASE("CpuExecutor::embed: deterministic mean of the final-norm hidden states, as the prefill computes them",
          "[ingress]") {
  const ModelConfig model = micro_model();
  auto exec = micro_executor(model);
  Rng rng(3);
  const std::vector<int32_t> prompt = random_tokens(rng, 14, model.vocab_size);
  std::vector<float> a, b;
  REQUIRE(exec->embed(prompt, a));
  REQUIRE(exec->embed(prompt, b));
  REQUIRE(a.size() == static_cast<size_t>(model.hidden_size));
  CHECK(a == b);  // bit for bit
  for (float x : a) REQUIRE(std::isfinite(x));
  std::vector<int32_t> other = prompt;
  other.back() = (other.back() + 1) % model.vocab_size;
  std::vector<float> c;
  REQUIRE(exec->embed(other, c));
  CHECK(c != a);
  CHECK(cosine(a, c) < 0.999999);

  // The reference: causal attention makes position i's hidden state a function
  // of the first i + 1 tokens, so with e_n = embed(first n tokens) the last
  // position's final-norm state is h_n = n e_n - (n - 1) e_(n-1), and the LM
  // head over it must give the logits the engine's own (paged) prefill of
  // those n tokens computes (equal up to the rounding of n e_n - (n - 1) e_(n-1)).
  const LlamaWeights w = make_dummy_weights(model, 7);
  std::vector<float> previous;
  for (int n = 1; n <= static_cast<int>(prompt.size()); ++n) {
    const std::vector<int32_t> head(prompt.begin(), prompt.begin() + n);
    std::vector<float> e;
    REQUIRE(exec->embed(head, e));
    std::vector<float> h(e.size());
    for (size_t i = 0; i < e.size(); ++i) h[i] = n * e[i] - (n > 1 ? (n - 1) * previous[i] : 0.0f);
    std::vector<float> logits(model.vocab_size);
    linear(h.data(), 1, w.output_embedding(), logits.data());
    const std::vector<float> ref = prefill_logits(model, head);
    REQUIRE(ref.size() == logits.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      REQUIRE(std::isfinite(logits[i]));
      worst = std::max(worst, std::abs(double(logits[i]) - ref[i]));
      scale = std::max(scale, std::abs(double(ref[i])));
    }
    INFO("prefix of " << n << " tokens: max |logit - reference| " << worst << ", max |reference| " << scale);
    CHECK(worst <= 1e-4 * std::max(1.0, scale));
    if (n == 1) CHECK(logits == ref);  // the same ops on the same row: bit for bit
    previous = e;
  }
}

TEST_CASE("CpuExecutor::embed touches no KV block: interleaved embeddings leave every step's tokens unchanged",
          "[ingress]") {
  const ModelConfig model = micro_model();
  const std::vector<Request> reqs = shared_prefix_requests(6, 10, 5, 6, model.vocab_size, 21, 0.0);
  EngineConfig cfg;
  cfg.cache.block_size = 8;
  cfg.scheduler.max_num_seqs = 3;
  cfg.max_model_len = 256;
  std::map<int64_t, std::vector<int32_t>> plain;
  {
    RunRecorder rec(false, true);
    Engine engine(0, cfg, 64, micro_executor(model), &rec);
    run_virtual(engine, reqs);
    plain = outputs_by_id(rec);
  }
  RunRecorder rec(false, true);
  Engine engine(0, cfg, 64, micro_executor(model), &rec);
  Rng rng(5);
  int64_t num_embeds = 0;
  run_virtual(engine, reqs, 0.01, [&](Engine& e, const Batch&) {
    const int used = e.kv_cache().num_used_blocks();
    std::vector<int32_t> blocks(e.kv_cache().num_blocks());  // all of them
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
    const KvBlockData before = e.executor().read_kv_blocks(blocks);
    std::vector<float> emb;
    REQUIRE(e.executor().embed(random_tokens(rng, 1 + static_cast<int>(rng.below(40)), model.vocab_size), emb));
    ++num_embeds;
    CHECK(e.kv_cache().num_used_blocks() == used);
    CHECK(e.check_invariants().empty());
    CHECK(e.executor().read_kv_blocks(blocks).bytes == before.bytes);
  });
  CHECK(num_embeds > 0);
  CHECK(outputs_by_id(rec) == plain);
}

TEST_CASE("Executor wrappers forward embed, and an executor without a model has none", "[ingress]") {
  const ModelConfig model = micro_model();
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  std::vector<float> direct;
  REQUIRE(micro_executor(model)->embed(prompt, direct));

  class NoProposer : public Proposer {
   public:
    void propose(int64_t, const std::vector<int32_t>&, int, std::vector<int32_t>&) override {}
  };
  SpeculativeExecutor spec(micro_executor(model), std::make_unique<NoProposer>(), 2, 0);
  std::vector<float> out;
  REQUIRE(spec.embed(prompt, out));
  CHECK(out == direct);

  class FixedCost : public CostModel {
   public:
    double predict(const StepShape&) const override { return 0.01; }
    std::string name() const override { return "fixed"; }
  };
  CostTimedExecutor timed(micro_executor(model), std::make_shared<FixedCost>());
  out.clear();
  REQUIRE(timed.embed(prompt, out));
  CHECK(out == direct);

  SimExecutor sim(std::make_shared<FixedCost>(), model.vocab_size);
  out.clear();
  CHECK_FALSE(sim.embed(prompt, out));
  CHECK(out.empty());
  CHECK_THROWS_AS(micro_executor(model)->embed({}, out), std::invalid_argument);
}

TEST_CASE("ingress: without a model embedding the request's own is looked up, and its length must fit",
          "[ingress]") {
  const ModelConfig model = micro_model();
  SemanticCacheConfig config;
  config.enabled = true;
  config.tau = 0.9;
  SimExecutor sim(nullptr, model.vocab_size);
  RunRecorder rec(false);
  Ingress ingress(config, sim, &rec);
  Request first;
  first.id = 0;
  first.prompt = {1, 2, 3};
  first.embedding = {1.0f, 0.0f, 0.0f};
  first.intent = 4;
  Request near = first;
  near.id = 1;
  near.prompt = {7, 8};
  near.embedding = {0.99f, 0.1f, 0.0f};
  REQUIRE(ingress.admit(first, 0.0));  // a miss: to the engine
  CHECK(first.arrival_s >= 0.0);
  CHECK(first.frontend_s == Approx(first.arrival_s));
  REQUIRE(ingress.admit(near, 0.0));  // nothing cached yet

  // Request 0 finishes; its answer is cached with the embedding its lookup used.
  Sequence seq(first);
  StepOutcome out;
  out.end_s = 1.0;
  SeqOutcome o;
  o.seq = &seq;
  o.finished = true;
  out.seqs.push_back(o);
  ingress.on_step(out);
  CHECK(ingress.stats().num_insertions == 1);

  Request again = near;
  again.id = 2;
  CHECK_FALSE(ingress.admit(again, 2.0));  // semantic hit of request 0's answer
  CHECK(ingress.num_answered() == 1);
  REQUIRE(rec.requests().size() == 1);
  CHECK(rec.requests()[0].answered_by == 2);
  CHECK(rec.requests()[0].finish_s >= 2.0);
  CHECK(ingress.lookup_seconds().size() == 3);
  for (const auto& [id, s] : ingress.lookup_seconds()) CHECK(s >= 0.0);

  Request wrong = near;
  wrong.id = 3;
  wrong.embedding = {1.0f, 0.0f};
  try {
    ingress.admit(wrong, 3.0);
    FAIL("a 2-value embedding fit a 3-dimensional cache");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("ingress.semantic_cache") && Catch::Contains("request 3"));
  }
}

TEST_CASE("ingress: an offline CPU run answers the repeats whose first copy finished before them", "[ingress]") {
  const ModelConfig model = ModelConfig::from_json_file("experiments/models/tiny.json");
  const std::vector<Request> reqs = requests_with_repeats(model.vocab_size);
  LoggingRecorder rec;
  const auto engine_ptr = tiny_cpu_engine(model, &rec);
  Engine& engine = *engine_ptr;
  SemanticCacheConfig config;
  config.enabled = true;
  config.tau = 1.0;
  Ingress ingress(config, engine.executor(), &rec);
  ListSource source(reqs);
  int64_t finished = 0;
  run_offline(engine, source, nullptr, &finished, &ingress);

  int64_t hits = 0;
  check_hits_follow_finishes(rec, reqs, &hits);
  const int64_t n = static_cast<int64_t>(reqs.size());
  CHECK(hits > 0);
  CHECK(hits < 12);  // a repeat that came while its first copy ran was computed again
  CHECK(ingress.num_answered() == hits);
  CHECK(ingress.stats().num_exact_hits == hits);
  CHECK(finished == n);
  CHECK(rec.num_arrived() == n);
  CHECK(rec.num_arrived() == rec.num_finished() + rec.num_cancelled());
  CHECK(rec.num_finished() == n);
  REQUIRE(ingress.lookup_seconds().size() == static_cast<size_t>(n));
  for (const auto& [id, s] : ingress.lookup_seconds()) CHECK(s > 0.0);
  // The same run twice decides the same way (admission follows the engine's queue, not the clock).
  LoggingRecorder rec2;
  const auto engine2_ptr = tiny_cpu_engine(model, &rec2);
  Engine& engine2 = *engine2_ptr;
  Ingress ingress2(config, engine2.executor(), &rec2);
  ListSource source2(reqs);
  run_offline(engine2, source2, nullptr, nullptr, &ingress2);
  std::vector<int64_t> hit_ids, hit_ids2;
  for (const auto& e : rec.log)
    if (e.kind == 'h') hit_ids.push_back(e.id);
  for (const auto& e : rec2.log)
    if (e.kind == 'h') hit_ids2.push_back(e.id);
  CHECK(hit_ids == hit_ids2);
  // A cache answer is the finished copy's: its recorded tokens, arrival at 0, answered after its lookup.
  for (const RequestRecord& r : rec.requests()) {
    CHECK(r.arrival_s == 0.0);
    if (r.answered_by) CHECK(r.finish_s > 0.0);
  }
}

TEST_CASE("ingress: a realtime CPU run looks up each arrival and answers only what finished before", "[ingress]") {
  const ModelConfig model = ModelConfig::from_json_file("experiments/models/tiny.json");
  std::vector<Request> reqs = requests_with_repeats(model.vocab_size);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].arrival_s = 0.004 * static_cast<double>(i);
  LoggingRecorder rec;
  const auto engine_ptr = tiny_cpu_engine(model, &rec);
  Engine& engine = *engine_ptr;
  SemanticCacheConfig config;
  config.enabled = true;
  config.tau = 1.0;
  Ingress ingress(config, engine.executor(), &rec);
  ListSource source(reqs);
  int64_t finished = 0;
  run_realtime(engine, source, nullptr, &finished, &ingress);
  int64_t hits = 0;
  check_hits_follow_finishes(rec, reqs, &hits);  // how many depends on the clock; which may hit does not
  const int64_t n = static_cast<int64_t>(reqs.size());
  CHECK(finished == n);
  CHECK(rec.num_arrived() == n);
  CHECK(rec.num_finished() + rec.num_cancelled() == n);
  CHECK(ingress.lookup_seconds().size() == static_cast<size_t>(n));
  // Every request's client sent it at its trace time: the lookup is front-end time.
  std::map<int64_t, double> sent;
  for (const Request& r : reqs) sent[r.id] = r.arrival_s;
  for (const RequestRecord& r : rec.requests()) CHECK(r.arrival_s == Approx(sent.at(r.id)).margin(1e-9));
}
