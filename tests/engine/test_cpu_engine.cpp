// The CPU engine end to end: generated tokens do not depend on prefix caching,
// chunked prefill or preemption (the executor is batch-invariant, so this is
// exact equality, not a tolerance).
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "engine/cpu_executor.h"
#include "engine/engine.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

struct Variant {
  std::string name;
  bool prefix_cache;
  bool chunked;
  int chunk_size;
  int num_blocks;
  int max_batch_tokens;
};

struct Outcome {
  std::map<int64_t, std::vector<int32_t>> tokens;
  int64_t preemptions = 0;
  int64_t cached_tokens = 0;
  int64_t finished = 0;
};

Outcome run_variant(const Variant& v, const std::vector<Request>& reqs, const ModelConfig& model) {
  EngineConfig cfg;
  cfg.cache.block_size = 8;
  cfg.cache.prefix_cache = v.prefix_cache;
  cfg.scheduler.chunked_prefill = v.chunked;
  cfg.scheduler.chunk_size = v.chunked ? v.chunk_size : 512;
  cfg.scheduler.max_batch_tokens = v.max_batch_tokens;
  cfg.scheduler.max_num_seqs = 8;
  cfg.max_model_len = 512;
  RunRecorder rec(false, /*keep_tokens=*/true);
  auto exec = std::make_unique<CpuExecutor>(model, make_dummy_weights(model, 7), v.num_blocks, cfg.cache.block_size,
                                            cfg.max_model_len);
  Engine engine(0, cfg, v.num_blocks, std::move(exec), &rec);
  run_virtual(engine, reqs, 0.01, [](Engine& e, const Batch&) {
    REQUIRE(e.kv_cache().check_invariants(e.scheduler().live_sequences()).empty());
  });
  Outcome out;
  out.tokens = outputs_by_id(rec);
  out.preemptions = engine.scheduler().num_preemptions();
  out.finished = rec.num_finished();
  for (const RequestRecord& r : rec.requests()) out.cached_tokens += r.cached_tokens;
  return out;
}

void check_all_variants(const std::vector<Request>& reqs, const ModelConfig& model) {
  const Variant base{"baseline: no prefix cache, no chunking", false, false, 0, 400, 512};
  const Outcome ref = run_variant(base, reqs, model);
  REQUIRE(ref.finished == static_cast<int64_t>(reqs.size()));
  for (const auto& [id, toks] : ref.tokens) REQUIRE(toks.size() == static_cast<size_t>(reqs[id].max_output_tokens));

  const std::vector<Variant> variants = {
      {"prefix cache on", true, false, 0, 400, 512},
      {"chunked prefill, chunk 7", false, true, 7, 400, 64},
      {"chunked prefill, chunk 16", true, true, 16, 400, 40},
      {"chunked prefill, chunk 33", true, true, 33, 400, 100},
      {"tiny KV budget (preemption), prefix on", true, true, 16, 12, 64},
      {"tiny KV budget (preemption), prefix off", false, true, 16, 12, 64},
  };
  for (const Variant& v : variants) {
    INFO(v.name);
    const Outcome out = run_variant(v, reqs, model);
    CHECK(out.finished == static_cast<int64_t>(reqs.size()));
    CHECK(out.tokens == ref.tokens);
    if (v.num_blocks < 100) CHECK(out.preemptions > 0);
    if (v.prefix_cache) CHECK(out.cached_tokens > 0);
  }
}

}  // namespace

TEST_CASE("greedy tokens are identical with prefix caching and chunking and preemption", "[cpu_engine]") {
  const ModelConfig model = micro_model();
  // Shared 40-token prefix, staggered arrivals so later requests hit the cache.
  check_all_variants(shared_prefix_requests(6, 40, 9, 12, model.vocab_size, 11, 0.025), model);
}

TEST_CASE("sampled tokens are identical too (seeded per request and position)", "[cpu_engine]") {
  const ModelConfig model = micro_model();
  std::vector<Request> reqs = shared_prefix_requests(5, 33, 6, 10, model.vocab_size, 5, 0.02);
  for (Request& r : reqs) {
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.9f;
    r.sampling.top_k = 50;
    r.sampling.seed = 1234;
  }
  check_all_variants(reqs, model);
}

TEST_CASE("a greedy model output is not degenerate", "[cpu_engine]") {
  // Guards the identity tests above against a model that always emits one token.
  const ModelConfig model = micro_model();
  const Variant v{"plain", false, false, 0, 400, 512};
  const Outcome out = run_variant(v, shared_prefix_requests(4, 8, 8, 12, model.vocab_size, 3, 0.0), model);
  std::set<int32_t> distinct;
  for (const auto& [id, toks] : out.tokens) distinct.insert(toks.begin(), toks.end());
  CHECK(distinct.size() > 8);
}

TEST_CASE("CPU executor logits do not depend on how a prompt is chunked", "[cpu_engine]") {
  // Prefill a prompt in three chunks, then compare the final logits with one
  // unchunked prefill: batch invariance makes them bitwise equal.
  const ModelConfig model = micro_model();
  const LlamaWeights weights = make_dummy_weights(model, 9);
  Rng rng(2);
  Request r;
  r.prompt = random_tokens(rng, 37, model.vocab_size);
  r.max_output_tokens = 1;
  auto logits_with_chunks = [&](std::vector<int> chunks) {
    CpuExecutor exec(model, weights, 16, 8, 128);
    Sequence seq(r);
    KvCacheManager kv(16, 8, false);
    for (int n : chunks) {
      REQUIRE(kv.allocate(seq, n));
      Batch b;
      b.items.push_back({&seq, seq.num_computed_tokens, n});
      exec.execute(b);
      seq.num_computed_tokens += n;
    }
    return exec.last_logits();
  };
  const std::vector<float> whole = logits_with_chunks({37});
  REQUIRE(whole.size() == static_cast<size_t>(model.vocab_size));
  CHECK(logits_with_chunks({10, 20, 7}) == whole);
  CHECK(logits_with_chunks({1, 1, 35}) == whole);
}

namespace {

// An independent, unpaged float64 Llama forward pass for one sequence: the
// textbook formulas, written without any of the engine's code.
std::vector<double> reference_logits(const ModelConfig& c, const LlamaWeights& w, const std::vector<int32_t>& tokens) {
  const int T = static_cast<int>(tokens.size()), H = c.hidden_size, d = c.head_dim;
  auto matvec = [](const Tensor& W, const std::vector<double>& x) {
    std::vector<double> y(W.rows(), 0.0);
    for (int64_t i = 0; i < W.rows(); ++i)
      for (int64_t j = 0; j < W.cols(); ++j) y[i] += W.data[i * W.cols() + j] * x[j];
    return y;
  };
  auto norm = [&](const std::vector<double>& x, const Tensor& g) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / x.size() + c.rms_norm_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g.data[i];
    return y;
  };
  auto rope = [&](std::vector<double>& v, int heads, int pos) {
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < d / 2; ++i) {
        const double theta = pos * std::pow(c.rope_theta, -2.0 * i / d);
        const double a = v[h * d + i], b = v[h * d + i + d / 2];
        v[h * d + i] = a * std::cos(theta) - b * std::sin(theta);
        v[h * d + i + d / 2] = b * std::cos(theta) + a * std::sin(theta);
      }
  };
  std::vector<std::vector<double>> x(T, std::vector<double>(H));
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < H; ++i) x[t][i] = w.embed.data[static_cast<size_t>(tokens[t]) * H + i];
  for (const LayerWeights& L : w.layers) {
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (int t = 0; t < T; ++t) {
      const auto h = norm(x[t], L.attn_norm);
      q[t] = matvec(L.wq, h);
      k[t] = matvec(L.wk, h);
      v[t] = matvec(L.wv, h);
      rope(q[t], c.num_heads, t);
      rope(k[t], c.num_kv_heads, t);
    }
    for (int t = 0; t < T; ++t) {
      std::vector<double> attn(c.q_size(), 0.0);
      for (int h = 0; h < c.num_heads; ++h) {
        const int g = h / (c.num_heads / c.num_kv_heads);
        std::vector<double> s(t + 1);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int i = 0; i < d; ++i) dot += q[t][h * d + i] * k[j][g * d + i];
          s[j] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, s[j]);
        }
        for (int j = 0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < d; ++i) attn[h * d + i] += s[j] / sum * v[j][g * d + i];
      }
      const auto o = matvec(L.wo, attn);
      for (int i = 0; i < H; ++i) x[t][i] += o[i];
      const auto h2 = norm(x[t], L.mlp_norm);
      auto gate = matvec(L.w_gate, h2);
      const auto up = matvec(L.w_up, h2);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const auto down = matvec(L.w_down, gate);
      for (int i = 0; i < H; ++i) x[t][i] += down[i];
    }
  }
  return matvec(w.output_embedding(), norm(x[T - 1], w.final_norm));
}

}  // namespace

TEST_CASE("CPU executor logits match an independent float64 forward pass", "[cpu_engine]") {
  for (int kv_heads : {1, 2, 4}) {
    const ModelConfig model = micro_model(256, 2, 64, 4, kv_heads);
    const LlamaWeights weights = make_dummy_weights(model, 21);
    Rng rng(kv_heads);
    Request r;
    r.prompt = random_tokens(rng, 29, model.vocab_size);
    r.max_output_tokens = 1;
    CpuExecutor exec(model, weights, 8, 8, 64);
    Sequence seq(r);
    KvCacheManager kv(8, 8, false);
    REQUIRE(kv.allocate(seq, 29));
    Batch b;
    b.items.push_back({&seq, 0, 29});
    exec.execute(b);
    const std::vector<double> ref = reference_logits(model, weights, seq.tokens());
    double err = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err = std::max(err, std::abs(exec.last_logits()[i] - ref[i]));
      scale = std::max(scale, std::abs(ref[i]));
    }
    INFO("kv heads " << kv_heads << " max error " << err << " of " << scale);
    CHECK(scale > 0.1);
    CHECK(err <= 1e-4 * scale);
  }
}
