#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/rng.h"

namespace testbed {

int32_t sample_token(const float* logits, int vocab_size, const SamplingParams& params, int64_t request_id,
                     int position) {
  if (params.temperature <= 0.0f) {  // greedy; ties go to the lowest id
    return static_cast<int32_t>(std::max_element(logits, logits + vocab_size) - logits);
  }
  std::vector<int32_t> ids(vocab_size);
  std::iota(ids.begin(), ids.end(), 0);
  // Candidates by descending logit, ties by id, so the order is total and portable.
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  int keep = vocab_size;
  if (params.top_k > 0 && params.top_k < vocab_size) {
    keep = params.top_k;
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), by_logit);
  } else {
    std::sort(ids.begin(), ids.end(), by_logit);
  }
  const double inv_t = 1.0 / params.temperature;
  const double top = logits[ids[0]] * inv_t;
  std::vector<double> probs(keep);
  double sum = 0.0;
  for (int i = 0; i < keep; ++i) sum += (probs[i] = std::exp(logits[ids[i]] * inv_t - top));
  if (params.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
    double mass = 0.0;
    int n = 0;
    while (n < keep && mass < params.top_p * sum) mass += probs[n++];
    keep = std::max(n, 1);
    sum = mass;
  }
  Rng rng(mix_seed(mix_seed(params.seed, static_cast<uint64_t>(request_id)), static_cast<uint64_t>(position)));
  const double u = rng.uniform() * sum;
  double acc = 0.0;
  for (int i = 0; i < keep; ++i) {
    acc += probs[i];
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace testbed
