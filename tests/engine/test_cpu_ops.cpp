#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "engine/model/cpu_ops.h"
#include "engine/common/rng.h"
#include "engine/sampler.h"
#include "support/engine_harness.h"

using namespace testbed;

TEST_CASE("linear is batch-invariant: a row's result ignores its neighbours", "[cpu_ops]") {
  Rng rng(1);
  for (auto [n, k] : std::vector<std::pair<int, int>>{{64, 64}, {128, 64}, {512, 64}, {37, 100}}) {
    Tensor w;
    w.shape = {n, k};
    for (int64_t i = 0; i < w.numel(); ++i) w.data.push_back(static_cast<float>(rng.normal()));
    std::vector<float> row(k);
    for (float& v : row) v = static_cast<float>(rng.normal());
    std::vector<float> alone(n);
    linear(row.data(), 1, w, alone.data());
    for (int rows : {2, 31, 32, 33, 70}) {
      for (int pos : {0, rows / 2, rows - 1}) {
        std::vector<float> x(static_cast<size_t>(rows) * k);
        for (float& v : x) v = static_cast<float>(rng.normal());
        std::memcpy(&x[static_cast<size_t>(pos) * k], row.data(), sizeof(float) * k);
        std::vector<float> y(static_cast<size_t>(rows) * n);
        linear(x.data(), rows, w, y.data());
        INFO("n " << n << " k " << k << " rows " << rows << " pos " << pos);
        CHECK(std::memcmp(&y[static_cast<size_t>(pos) * n], alone.data(), sizeof(float) * n) == 0);
      }
    }
    // And it computes the product.
    double err = 0;
    for (int i = 0; i < n; ++i) {
      double ref = 0;
      for (int j = 0; j < k; ++j) ref += static_cast<double>(w.data[i * k + j]) * row[j];
      err = std::max(err, std::abs(ref - alone[i]));
    }
    CHECK(err < 1e-4);
  }
}

TEST_CASE("rms_norm and silu_mul follow their formulas", "[cpu_ops]") {
  std::vector<float> x{1, -2, 3, -4}, w{1, 2, 0.5f, 1}, y(4);
  rms_norm(x.data(), w.data(), 1, 4, 0.0f, y.data());
  const float inv = 1.0f / std::sqrt((1 + 4 + 9 + 16) / 4.0f);
  CHECK(y[1] == Approx(-2 * inv * 2));
  CHECK(y[2] == Approx(3 * inv * 0.5));
  std::vector<float> g{0.0f, 2.0f}, u{3.0f, 5.0f}, o(2);
  silu_mul(g.data(), u.data(), 2, o.data());
  CHECK(o[0] == Approx(0.0));
  CHECK(o[1] == Approx(2.0 / (1 + std::exp(-2.0)) * 5));
}

TEST_CASE("RoPE rotates pairs (i and i + d/2) by position times frequency", "[cpu_ops]") {
  ModelConfig cfg = test::micro_model();
  RopeTable rope(cfg, 64);
  const int d = cfg.head_dim;
  std::vector<float> v(d);
  for (int i = 0; i < d; ++i) v[i] = static_cast<float>(i + 1);
  std::vector<float> r = v;
  rope.apply(r.data(), 1, 5);
  for (int i = 0; i < d / 2; ++i) {
    const double th = 5 * std::pow(cfg.rope_theta, -2.0 * i / d);
    CHECK(r[i] == Approx(v[i] * std::cos(th) - v[i + d / 2] * std::sin(th)).margin(1e-5));
    CHECK(r[i + d / 2] == Approx(v[i + d / 2] * std::cos(th) + v[i] * std::sin(th)).margin(1e-5));
  }
  std::vector<float> zero = v;
  rope.apply(zero.data(), 1, 0);
  CHECK(zero == v);
}

TEST_CASE("Llama 3 RoPE scaling keeps high frequencies and divides low ones", "[cpu_ops]") {
  ModelConfig cfg = ModelConfig::from_json_file("experiments/models/llama-3.1-8b.json");
  const auto inv = rope_inverse_frequencies(cfg);
  CHECK(inv[0] == Approx(1.0));                                        // wavelength 2*pi: kept
  const double unscaled_last = std::pow(cfg.rope_theta, -2.0 * (inv.size() - 1) / cfg.head_dim);
  CHECK(inv.back() == Approx(unscaled_last / 8.0));                    // longest wavelength: / factor
}

TEST_CASE("sampling: greedy and top-k 1 and seeded draws", "[sampler]") {
  std::vector<float> logits{0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  SamplingParams greedy;
  CHECK(sample_token(logits.data(), 5, greedy, 0, 0) == 1);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 1;
  CHECK(sample_token(logits.data(), 5, p, 3, 9) == 1);
  p.top_k = 0;
  p.top_p = 0.01f;  // only the most likely token survives
  CHECK(sample_token(logits.data(), 5, p, 3, 9) == 1);
  p.top_p = 1.0f;
  p.seed = 77;
  const int32_t a = sample_token(logits.data(), 5, p, 4, 10);
  CHECK(sample_token(logits.data(), 5, p, 4, 10) == a);  // same request, position, seed
  // Frequencies follow the softmax.
  std::vector<int> counts(5, 0);
  for (int pos = 0; pos < 20000; ++pos) ++counts[sample_token(logits.data(), 5, p, 1, pos)];
  double z = 0;
  for (float l : logits) z += std::exp(l);
  for (int i = 0; i < 5; ++i) CHECK(counts[i] / 20000.0 == Approx(std::exp(logits[i]) / z).margin(0.015));
}
