#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/spec/spec_rng.h"
#include "kernels/spec/verify_ref.h"

namespace testbed {
namespace {

void check(const VerifyBatch& b, bool rejection) {
  if (b.num_seqs < 0 || b.vocab <= 0 || (b.num_seqs > 0 && (!b.draft_offsets || !b.target_probs)))
    throw std::invalid_argument("verify: malformed batch");
  if (rejection && b.num_seqs > 0 && (!b.seeds || !b.request_ids || !b.positions))
    throw std::invalid_argument("verify: rejection sampling needs seeds, request ids and positions");
  for (int i = 0; i < b.num_seqs; ++i) {
    const int a = b.draft_offsets[i], e = b.draft_offsets[i + 1];
    if (e < a) throw std::invalid_argument("verify: draft_offsets decrease at sequence " + std::to_string(i));
    if (e > a && !b.draft_tokens) throw std::invalid_argument("verify: no draft tokens");
    if (rejection && e > a && !b.draft_probs) throw std::invalid_argument("verify: rejection sampling needs draft_probs");
    for (int t = a; t < e; ++t)
      if (b.draft_tokens[t] < 0 || b.draft_tokens[t] >= b.vocab)
        throw std::invalid_argument("verify: draft token " + std::to_string(b.draft_tokens[t]) + " outside the vocabulary");
  }
}

int32_t argmax(const float* p, int vocab) {
  return static_cast<int32_t>(std::max_element(p, p + vocab) - p);  // the first maximum: ties to the lowest id
}

}  // namespace

int32_t sample_from_probs_ref(const float* p, int vocab, double u) {
  double total = 0;
  for (int v = 0; v < vocab; ++v) total += p[v];
  const double target = u * total;
  double sum = 0;
  int32_t last = 0;
  for (int v = 0; v < vocab; ++v) {
    if (p[v] <= 0) continue;
    sum += p[v];
    last = v;
    if (sum > target) return v;
  }
  return last;  // u * total rounded up to the total: the last token with mass
}

void verify_greedy_ref(const VerifyBatch& b, const VerifyOutput& out) {
  check(b, false);
  for (int i = 0; i < b.num_seqs; ++i) {
    const int first = b.draft_offsets[i], k = b.draft_offsets[i + 1] - first;
    const float* rows = b.target_probs + static_cast<size_t>(first + i) * b.vocab;
    int32_t* emit = out.out_tokens + first + i;
    int j = 0;
    for (; j < k; ++j) {
      const int32_t best = argmax(rows + static_cast<size_t>(j) * b.vocab, b.vocab);
      if (best != b.draft_tokens[first + j]) break;
      emit[j] = best;
    }
    emit[j] = argmax(rows + static_cast<size_t>(j) * b.vocab, b.vocab);  // the correction, or the bonus at j = k
    out.num_accepted[i] = j;
  }
}

void verify_rejection_ref(const VerifyBatch& b, const VerifyOutput& out) {
  check(b, true);
  std::vector<float> residual(b.vocab);
  for (int i = 0; i < b.num_seqs; ++i) {
    const int first = b.draft_offsets[i], k = b.draft_offsets[i + 1] - first;
    const float* p_rows = b.target_probs + static_cast<size_t>(first + i) * b.vocab;
    const float* q_rows = b.draft_probs ? b.draft_probs + static_cast<size_t>(first) * b.vocab : nullptr;
    int32_t* emit = out.out_tokens + first + i;
    const auto u = [&](int j, uint64_t stream) { return spec_uniform(b.seeds[i], b.request_ids[i], b.positions[i] + j, stream); };
    int j = 0;
    for (; j < k; ++j) {
      const float* p = p_rows + static_cast<size_t>(j) * b.vocab;
      const float* q = q_rows + static_cast<size_t>(j) * b.vocab;
      const int32_t x = b.draft_tokens[first + j];
      if (u(j, kSpecAccept) * q[x] < p[x]) {
        emit[j] = x;
        continue;
      }
      double mass = 0;
      for (int v = 0; v < b.vocab; ++v) mass += residual[v] = std::max(0.0f, p[v] - q[v]);
      emit[j] = sample_from_probs_ref(mass > 0 ? residual.data() : p, b.vocab, u(j, kSpecSample));
      break;
    }
    if (j == k) emit[k] = sample_from_probs_ref(p_rows + static_cast<size_t>(k) * b.vocab, b.vocab, u(k, kSpecSample));
    out.num_accepted[i] = j;
  }
}

}  // namespace testbed
