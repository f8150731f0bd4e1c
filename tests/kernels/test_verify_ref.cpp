// The speculative-verification references (kernels/spec/verify.h): greedy
// keeps exactly the target's argmax chain; rejection sampling matches a direct
// statement of the rule on random p and q (q(x) = 0 and p = q included); its
// emitted tokens follow the target's distribution (a chi-square test, which a
// deliberately broken verifier fails); the random numbers depend on (seed,
// request, position, stream) only.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/common/rng.h"
#include "kernels/spec/spec_rng.h"
#include "kernels/spec/verify_ref.h"
#include "support/chi_square.h"

using namespace testbed;
using testbed::test::chi_square;
using testbed::test::chi_square_critical_999;

namespace {

// A batch of sequences with k_i drafts each, probabilities filled by the caller.
struct Problem {
  int vocab = 0;
  std::vector<int32_t> offsets{0}, drafts;
  std::vector<float> p, q;  // (total + n) x vocab, total x vocab
  std::vector<uint64_t> seeds;
  std::vector<int64_t> requests;
  std::vector<int32_t> positions;
  std::vector<int32_t> accepted, out;

  explicit Problem(int v) : vocab(v) {}
  int num_seqs() const { return static_cast<int>(offsets.size()) - 1; }
  void add(int k, uint64_t seed = 1, int64_t request = 0, int32_t position = 0) {
    offsets.push_back(offsets.back() + k);
    drafts.resize(offsets.back(), 0);
    p.resize(static_cast<size_t>(offsets.back() + num_seqs()) * vocab, 0.0f);
    q.resize(static_cast<size_t>(offsets.back()) * vocab, 0.0f);
    seeds.push_back(seed);
    requests.push_back(request);
    positions.push_back(position);
  }
  float* p_row(int seq, int j) { return &p[static_cast<size_t>(offsets[seq] + seq + j) * vocab]; }
  float* q_row(int seq, int j) { return &q[static_cast<size_t>(offsets[seq] + j) * vocab]; }
  VerifyBatch batch() const {
    VerifyBatch b;
    b.num_seqs = num_seqs();
    b.vocab = vocab;
    b.draft_offsets = offsets.data();
    b.draft_tokens = drafts.data();
    b.target_probs = p.data();
    b.draft_probs = q.data();
    b.seeds = seeds.data();
    b.request_ids = requests.data();
    b.positions = positions.data();
    return b;
  }
  void run(bool rejection) {
    accepted.assign(num_seqs(), -1);
    out.assign(offsets.back() + num_seqs(), -1);
    const VerifyOutput o{accepted.data(), out.data()};
    if (rejection)
      verify_rejection_ref(batch(), o);
    else
      verify_greedy_ref(batch(), o);
  }
  std::vector<int32_t> emitted(int seq) const {
    const int first = offsets[seq] + seq;
    return {out.begin() + first, out.begin() + first + accepted[seq] + 1};
  }
};

void random_dist(Rng& rng, float* row, int vocab, double zero_share = 0.0) {
  double sum = 0;
  for (int v = 0; v < vocab; ++v) sum += row[v] = rng.uniform() < zero_share ? 0.0f : static_cast<float>(rng.exponential(1.0));
  if (sum == 0) row[0] = 1.0f, sum = 1.0;
  for (int v = 0; v < vocab; ++v) row[v] = static_cast<float>(row[v] / sum);
}

void one_hot(float* row, int vocab, int token) {
  std::fill(row, row + vocab, 0.01f);
  row[token] = 1.0f;
}

// The rule, stated directly (not the reference's code): accept x with probability
// min(1, p(x)/q(x)), else draw from norm(max(0, p - q)); a bonus from p.
std::vector<int32_t> direct_rule(const Problem& pb, int seq) {
  const int first = pb.offsets[seq], k = pb.offsets[seq + 1] - first;
  std::vector<int32_t> tokens;
  for (int j = 0; j <= k; ++j) {
    const float* p = &pb.p[static_cast<size_t>(first + seq + j) * pb.vocab];
    const double us = spec_uniform(pb.seeds[seq], pb.requests[seq], pb.positions[seq] + j, kSpecSample);
    std::vector<double> dist(p, p + pb.vocab);
    if (j < k) {
      const float* q = &pb.q[static_cast<size_t>(first + j) * pb.vocab];
      const int x = pb.drafts[first + j];
      const double ua = spec_uniform(pb.seeds[seq], pb.requests[seq], pb.positions[seq] + j, kSpecAccept);
      const double ratio = q[x] > 0 ? std::min(1.0, static_cast<double>(p[x]) / q[x]) : (p[x] > 0 ? 1.0 : 0.0);
      if (ua < ratio) {
        tokens.push_back(x);
        continue;
      }
      double mass = 0;
      for (int v = 0; v < pb.vocab; ++v) mass += dist[v] = std::max(0.0f, p[v] - q[v]);
      if (mass == 0) dist.assign(p, p + pb.vocab);
    }
    double total = 0;
    for (double d : dist) total += d;
    double sum = 0;
    int pick = -1;
    for (int v = 0; v < pb.vocab && pick < 0; ++v)
      if (dist[v] > 0 && (sum += dist[v]) > us * total) pick = v;
    for (int v = pb.vocab - 1; pick < 0 && v >= 0; --v)
      if (dist[v] > 0) pick = v;
    tokens.push_back(pick);
    break;
  }
  return tokens;
}

}  // namespace

TEST_CASE("greedy verification keeps the target's argmax chain and adds one token", "[spec]") {
  const int V = 6;
  Problem pb(V);
  pb.add(3);  // all three drafts match, then the bonus
  pb.add(3);  // the second draft is wrong
  pb.add(0);  // no draft: plain greedy decoding
  pb.add(2);  // the first draft is wrong
  const int target[4][4] = {{1, 2, 3, 4}, {5, 0, 1, 2}, {3, 0, 0, 0}, {2, 4, 0, 0}};
  const int draft[4][3] = {{1, 2, 3}, {5, 1, 1}, {0, 0, 0}, {1, 4, 0}};
  for (int s = 0; s < 4; ++s) {
    const int k = pb.offsets[s + 1] - pb.offsets[s];
    for (int j = 0; j <= k; ++j) one_hot(pb.p_row(s, j), V, target[s][j]);
    for (int j = 0; j < k; ++j) pb.drafts[pb.offsets[s] + j] = draft[s][j];
  }
  pb.p_row(0, 3)[0] = 1.0f;  // a tie at the bonus row: the lowest id wins
  pb.run(false);
  CHECK(pb.accepted == std::vector<int32_t>{3, 1, 0, 0});
  CHECK(pb.emitted(0) == std::vector<int32_t>{1, 2, 3, 0});
  CHECK(pb.emitted(1) == std::vector<int32_t>{5, 0});
  CHECK(pb.emitted(2) == std::vector<int32_t>{3});
  CHECK(pb.emitted(3) == std::vector<int32_t>{2});
}

TEST_CASE("rejection sampling follows the rule on random p and q, q(x) = 0 and p = q included", "[spec]") {
  Rng rng(42);
  const int V = 17;
  Problem pb(V);
  for (int s = 0; s < 300; ++s) {
    const int k = static_cast<int>(rng.below(6));
    pb.add(k, 1000 + s, s * 7, static_cast<int32_t>(rng.below(4000)));
    for (int j = 0; j <= k; ++j) random_dist(rng, pb.p_row(s, j), V, s % 3 == 0 ? 0.4 : 0.0);
    for (int j = 0; j < k; ++j) {
      float* q = pb.q_row(s, j);
      if (s % 5 == 1) {
        std::copy(pb.p_row(s, j), pb.p_row(s, j) + V, q);  // p = q: always accepted
      } else {
        random_dist(rng, q, V, s % 4 == 2 ? 0.5 : 0.0);
      }
      // Drafts are drawn from q, as a proposer's are; some are a token the draft gave no mass.
      int x = sample_from_probs_ref(q, V, rng.uniform());
      if (s % 7 == 3) {
        x = static_cast<int>(rng.below(V));
        q[x] = 0.0f;
      }
      pb.drafts[pb.offsets[s] + j] = x;
    }
  }
  pb.run(true);
  int all_kept = 0, with_p_eq_q = 0;
  for (int s = 0; s < pb.num_seqs(); ++s) {
    INFO("sequence " << s);
    CHECK(pb.emitted(s) == direct_rule(pb, s));
    const int k = pb.offsets[s + 1] - pb.offsets[s];
    all_kept += pb.accepted[s] == k;
    if (s % 5 == 1 && s % 7 != 3) {
      CHECK(pb.accepted[s] == k);
      ++with_p_eq_q;
    }
  }
  CHECK(with_p_eq_q > 40);
  CHECK(all_kept > 60);
  CHECK(all_kept < 300);
}

TEST_CASE("rejection-sampled tokens follow the target's distribution", "[spec]") {
  // 40,000 seeded trials of one sequence with k = 3 drafts, each drawn from its q.
  // Per position, the emitted token's counts against p: a chi-square test at
  // significance 0.001 (dof = 7 cells - 1 for 8 tokens).
  // Power: a verifier that keeps every draft emits tokens distributed as q;
  // with these p and q it must fail the same test.
  const int V = 8, k = 3, n = 40000;
  Rng setup(7);
  Problem shape(V);
  shape.add(k);
  for (int j = 0; j <= k; ++j) random_dist(setup, shape.p_row(0, j), V);
  for (int j = 0; j < k; ++j) random_dist(setup, shape.q_row(0, j), V);
  std::vector<std::vector<int>> counts(k + 1, std::vector<int>(V, 0)), broken(k + 1, std::vector<int>(V, 0));
  Rng draws(11);
  for (int t = 0; t < n; ++t) {
    Problem pb = shape;
    pb.seeds[0] = 5000 + t;
    pb.requests[0] = t;
    for (int j = 0; j < k; ++j)
      pb.drafts[j] = sample_from_probs_ref(pb.q_row(0, j), V, draws.uniform());
    pb.run(true);
    const std::vector<int32_t> e = pb.emitted(0);
    for (size_t j = 0; j < e.size(); ++j) ++counts[j][e[j]];
    for (int j = 0; j < k; ++j) ++broken[j][pb.drafts[j]];  // "keep every draft"
  }
  for (int j = 0; j <= k; ++j) {
    int reached = 0;
    for (int c : counts[j]) reached += c;
    INFO("position " << j << ", emitted in " << reached << " trials");
    REQUIRE(reached > 2000);
    int dof = 0;
    const double stat = chi_square(counts[j], shape.p_row(0, j), reached, &dof);
    REQUIRE(dof >= 1);
    CHECK(stat < chi_square_critical_999(dof));
    if (j < k) {
      int dof_b = 0;
      CHECK(chi_square(broken[j], shape.p_row(0, j), n, &dof_b) > chi_square_critical_999(dof_b));
    }
  }
}

TEST_CASE("verification draws depend on seed, request, position and stream only", "[spec]") {
  const double a = spec_uniform(1, 2, 3, kSpecAccept);
  CHECK(a == spec_uniform(1, 2, 3, kSpecAccept));
  CHECK(a != spec_uniform(2, 2, 3, kSpecAccept));
  CHECK(a != spec_uniform(1, 3, 3, kSpecAccept));
  CHECK(a != spec_uniform(1, 2, 4, kSpecAccept));
  CHECK(a != spec_uniform(1, 2, 3, kSpecSample));
  // A sequence's result does not depend on the others in its batch.
  Rng rng(3);
  const int V = 11;
  Problem alone(V), batch(V);
  alone.add(4, 9, 77, 120);
  batch.add(2, 1, 5, 10);
  batch.add(4, 9, 77, 120);
  for (int j = 0; j <= 4; ++j) random_dist(rng, alone.p_row(0, j), V);
  for (int j = 0; j < 4; ++j) random_dist(rng, alone.q_row(0, j), V), alone.drafts[j] = j;
  for (int j = 0; j <= 4; ++j) std::copy(alone.p_row(0, j), alone.p_row(0, j) + V, batch.p_row(1, j));
  for (int j = 0; j < 4; ++j) std::copy(alone.q_row(0, j), alone.q_row(0, j) + V, batch.q_row(1, j)), batch.drafts[batch.offsets[1] + j] = j;
  for (int j = 0; j <= 2; ++j) random_dist(rng, batch.p_row(0, j), V);
  for (int j = 0; j < 2; ++j) random_dist(rng, batch.q_row(0, j), V);
  alone.run(true);
  batch.run(true);
  CHECK(alone.emitted(0) == batch.emitted(1));
  CHECK(alone.accepted[0] == batch.accepted[1]);
}

TEST_CASE("verification rejects malformed input", "[spec]") {
  Problem pb(4);
  pb.add(2);
  pb.drafts[1] = 4;  // outside the vocabulary
  CHECK_THROWS_AS(pb.run(false), std::invalid_argument);
  CHECK_THROWS_AS(pb.run(true), std::invalid_argument);
}
