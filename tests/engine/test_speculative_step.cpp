// Steps that verify proposed tokens, on the real CPU model: an executor that,
// after every step, proposes k tokens per decoding sequence (a seeded random
// number of them right, the rest wrong) drives the engine. The target verifies
// them, so the generated tokens must be exactly those of a run without
// proposals; rejected positions must be rolled back before anything reaches
// the prefix cache (every block registered holds the tokens its hash names),
// and the KV invariants must hold after every step.
#include <catch2/catch.hpp>
#include <map>

#include "engine/block_hash.h"
#include "engine/cpu_executor.h"
#include "engine/engine.h"
#include "engine/metrics/run_recorder.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

// Which token each executor write put in each KV slot, by (block, slot).
using Shadow = std::map<std::pair<int32_t, int>, int32_t>;

// Wraps the CPU executor: records what each step writes into the cache, and
// proposes for every item that sampled the next k tokens of the reference
// output, of which a seeded random prefix is right (the rest are off by one).
class ProposingExecutor : public Executor {
 public:
  ProposingExecutor(std::unique_ptr<Executor> inner, std::map<int64_t, std::vector<int32_t>> reference, int k,
                    uint64_t seed, int block_size, int vocab, Shadow& shadow)
      : inner_(std::move(inner)), reference_(std::move(reference)), k_(k), rng_(seed), bs_(block_size),
        vocab_(vocab), shadow_(shadow) {}

  StepResult execute(const Batch& batch) override {
    for (const ScheduledSeq& item : batch.items)
      for (int p = item.num_computed; p < item.num_computed + item.num_new; ++p)
        shadow_[{item.seq->block_table[p / bs_], p % bs_}] = item.token_at(p);
    StepResult r = inner_->execute(batch);
    r.draft_offsets.assign(1, 0);
    for (int i = 0; i < batch.num_seqs(); ++i) {
      const Sequence& seq = *batch.items[i].seq;
      if (r.num_tokens(i) > 0) {
        const std::vector<int32_t>& ref = reference_.at(seq.id());
        const size_t next = static_cast<size_t>(seq.num_output_tokens() + r.num_tokens(i));
        const int right = static_cast<int>(rng_.below(k_ + 1));
        for (int j = 0; j < k_ && next + j < ref.size(); ++j) {
          const int32_t truth = ref[next + j];
          r.drafts.push_back(j < right ? truth : (truth + 1) % vocab_);
        }
      }
      r.draft_offsets.push_back(static_cast<int32_t>(r.drafts.size()));
    }
    return r;
  }
  std::string name() const override { return "proposing " + inner_->name(); }

 private:
  std::unique_ptr<Executor> inner_;
  std::map<int64_t, std::vector<int32_t>> reference_;
  int k_;
  Rng rng_;
  int bs_, vocab_;
  Shadow& shadow_;
};

// Records tokens, and checks every block the cache registers: its contents,
// as the executor wrote them, must hash (under the event's parent) to the
// registered hash. A block holding a rolled-back proposed token would not.
class CheckingRecorder : public RunRecorder {
 public:
  CheckingRecorder(const Shadow& shadow, int block_size) : RunRecorder(false, true), shadow_(shadow), bs_(block_size) {}
  void on_kv_events(int instance, const KvEvent* events, size_t n) override {
    RunRecorder::on_kv_events(instance, events, n);
    for (size_t i = 0; i < n; ++i) check(events[i]);
  }
  void check(const KvEvent& e) {
    if (e.kind != KvEvent::Kind::BlockStored || !engine) return;
    const int block = engine->kv_cache().cached_block(e.block_hash);
    std::vector<int32_t> tokens(bs_, -1);
    for (int s = 0; s < bs_; ++s) {
      auto it = shadow_.find({block, s});
      if (it != shadow_.end()) tokens[s] = it->second;
    }
    ++num_checked;
    if (block < 0 || hash_block(e.parent_hash, tokens.data(), bs_) != e.block_hash) ++num_bad;
  }
  const Engine* engine = nullptr;
  int num_checked = 0, num_bad = 0;

 private:
  const Shadow& shadow_;
  int bs_;
};

struct Config {
  bool prefix_cache = true;
  bool chunked = true;
  int num_blocks = 400;
  int k = 0;  // proposed tokens per step (0: none)
};

struct Run {
  std::map<int64_t, std::vector<int32_t>> tokens;
  int64_t proposed = 0, accepted = 0, preemptions = 0, cached_tokens = 0;
  int blocks_checked = 0, bad_blocks = 0;
};

Run run(const Config& c, const std::vector<Request>& reqs, const ModelConfig& model,
        const std::map<int64_t, std::vector<int32_t>>& reference) {
  EngineConfig cfg;
  cfg.cache.block_size = 8;
  cfg.cache.prefix_cache = c.prefix_cache;
  cfg.scheduler.chunked_prefill = c.chunked;
  cfg.scheduler.chunk_size = c.chunked ? 16 : 512;
  cfg.scheduler.max_batch_tokens = c.chunked ? 48 : 512;
  cfg.scheduler.max_num_seqs = 6;
  cfg.max_model_len = 512;
  Shadow shadow;
  CheckingRecorder rec(shadow, cfg.cache.block_size);
  std::unique_ptr<Executor> exec = std::make_unique<CpuExecutor>(model, make_dummy_weights(model, 7), c.num_blocks,
                                                                 cfg.cache.block_size, cfg.max_model_len);
  if (c.k > 0)
    exec = std::make_unique<ProposingExecutor>(std::move(exec), reference, c.k, 99, cfg.cache.block_size,
                                               model.vocab_size, shadow);
  Engine engine(0, cfg, c.num_blocks, std::move(exec), &rec);
  rec.engine = &engine;
  Run out;
  double now = 0.0;
  size_t next = 0;
  while (next < reqs.size() || engine.has_unfinished()) {
    if (!engine.has_unfinished() && reqs[next].arrival_s > now) now = reqs[next].arrival_s;
    while (next < reqs.size() && reqs[next].arrival_s <= now) engine.add_request(reqs[next++], now);
    // A virtual clock (every step lasts 10 ms), so batches do not depend on timing.
    const StepPlan plan = engine.begin_step(now);
    REQUIRE_FALSE(plan.empty());
    const StepOutcome o = engine.end_step(plan, engine.executor().execute(plan.batch), now + 0.01);
    for (const SeqOutcome& s : o.seqs) {
      out.proposed += s.num_draft;
      out.accepted += s.num_accepted;
      REQUIRE(s.num_accepted <= s.num_draft);
      if (s.num_appended > 0) REQUIRE(s.num_appended == s.num_accepted + 1);
    }
    now = o.end_s;
    REQUIRE(engine.check_invariants().empty());
    REQUIRE(engine.kv_cache().num_free_blocks() + engine.kv_cache().num_used_blocks() == c.num_blocks);
  }
  CHECK(engine.kv_cache().num_used_blocks() == 0);
  CHECK(engine.check_invariants().empty());
  out.tokens = outputs_by_id(rec);
  out.preemptions = engine.scheduler().num_preemptions();
  for (const RequestRecord& r : rec.requests()) out.cached_tokens += r.cached_tokens;
  out.blocks_checked = rec.num_checked;
  out.bad_blocks = rec.num_bad;
  return out;
}

void check_speculation(const std::vector<Request>& reqs, const ModelConfig& model) {
  const Run reference = run(Config{false, false, 400, 0}, reqs, model, {});
  REQUIRE(reference.tokens.size() == reqs.size());
  for (const Config& c : {Config{true, true, 400, 3}, Config{false, false, 400, 4}, Config{true, true, 400, 1},
                          Config{true, true, 14, 3}, Config{false, true, 14, 5}}) {
    INFO("prefix cache " << c.prefix_cache << ", chunked " << c.chunked << ", " << c.num_blocks << " blocks, k "
                         << c.k);
    const Run r = run(c, reqs, model, reference.tokens);
    CHECK(r.tokens == reference.tokens);
    CHECK(r.proposed > 0);
    CHECK(r.accepted > 0);
    CHECK(r.accepted < r.proposed);  // rejections happened, and were rolled back
    CHECK(r.bad_blocks == 0);
    if (c.prefix_cache) {
      CHECK(r.blocks_checked > 0);
      CHECK(r.cached_tokens > 0);
    }
    if (c.num_blocks < 100) CHECK(r.preemptions > 0);
  }
}

}  // namespace

TEST_CASE("verified proposals leave greedy tokens unchanged and never cache a rejected token", "[engine][spec]") {
  const ModelConfig model = micro_model();
  check_speculation(shared_prefix_requests(6, 40, 9, 20, model.vocab_size, 11, 0.025), model);
}

TEST_CASE("verified proposals leave sampled tokens unchanged too", "[engine][spec]") {
  const ModelConfig model = micro_model();
  std::vector<Request> reqs = shared_prefix_requests(5, 33, 6, 18, model.vocab_size, 5, 0.02);
  for (Request& r : reqs) {
    r.sampling.temperature = 0.8f;
    r.sampling.top_k = 50;
    r.sampling.seed = 1234;
  }
  check_speculation(reqs, model);
}

TEST_CASE("the executor returns the probabilities it sampled verified positions from", "[engine][spec]") {
  const ModelConfig model = micro_model();
  CpuExecutor exec(model, make_dummy_weights(model, 3), 8, 8, 64);
  KvCacheManager kv(8, 8, false);
  Rng rng(1);
  Request greedy;
  greedy.id = 0;
  greedy.prompt = random_tokens(rng, 12, model.vocab_size);
  Request sampled = greedy;
  sampled.id = 1;
  sampled.sampling.temperature = 0.7f;
  sampled.sampling.top_k = 20;
  Sequence a(greedy), b(sampled);
  REQUIRE(kv.allocate(a, 12));
  REQUIRE(kv.allocate(b, 12));
  Batch batch;
  batch.add(&a, 0, 12);
  batch.add(&b, 0, 12);
  batch.want_probs = true;
  const StepResult r = exec.execute(batch);
  REQUIRE(r.vocab_size == model.vocab_size);
  REQUIRE(r.prob_offsets == std::vector<int32_t>{0, 1, 2});
  const int V = model.vocab_size;
  for (int row = 0; row < 2; ++row) {
    const float* p = &r.probs[static_cast<size_t>(row) * V];
    double sum = 0;
    int nonzero = 0;
    for (int v = 0; v < V; ++v) {
      sum += p[v];
      nonzero += p[v] > 0;
    }
    CHECK(sum == Approx(1.0).epsilon(1e-5));
    CHECK(p[r.tokens_of(row)[0]] > 0);  // the token drawn has mass
    if (row == 0) CHECK(nonzero == 1);  // greedy: one-hot on the argmax
    if (row == 1) CHECK(nonzero <= 20);  // top-k
  }
}

TEST_CASE("an executor that breaks the token contract is a logic error", "[engine][spec]") {
  // Returns two tokens for every sampling item, although none proposed anything.
  class Greedy2 : public Executor {
   public:
    StepResult execute(const Batch& b) override {
      StepResult r;
      for (const ScheduledSeq& item : b.items) {
        const int32_t two[] = {1, 2};
        r.add_item(two, item.samples() ? 2 : 0);
      }
      return r;
    }
    std::string name() const override { return "broken"; }
  };
  EngineConfig cfg;
  cfg.max_model_len = 256;
  Engine engine(0, cfg, 32, std::make_unique<Greedy2>(), nullptr);
  Request r;
  r.prompt = {1, 2, 3};
  r.max_output_tokens = 4;
  engine.add_request(r, 0.0);
  CHECK_THROWS_AS(engine.step(0.0), std::logic_error);
}
