#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/common/rng.h"

namespace testbed {
namespace {

// The candidates a non-greedy draw picks from: ids by descending logit (ties
// by id, so the order is total and portable), their unnormalised
// probabilities, how many are kept and their mass.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<double> probs;
  int keep = 0;
  double sum = 0.0;
};

Candidates candidates(const float* logits, int vocab_size, const SamplingParams& params) {
  Candidates c;
  c.ids.resize(vocab_size);
  std::iota(c.ids.begin(), c.ids.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  c.keep = vocab_size;
  if (params.top_k > 0 && params.top_k < vocab_size) {
    c.keep = params.top_k;
    std::partial_sort(c.ids.begin(), c.ids.begin() + c.keep, c.ids.end(), by_logit);
  } else {
    std::sort(c.ids.begin(), c.ids.end(), by_logit);
  }
  const double inv_t = 1.0 / params.temperature;
  const double top = logits[c.ids[0]] * inv_t;
  c.probs.resize(c.keep);
  for (int i = 0; i < c.keep; ++i) c.sum += (c.probs[i] = std::exp(logits[c.ids[i]] * inv_t - top));
  if (params.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
    double mass = 0.0;
    int n = 0;
    while (n < c.keep && mass < params.top_p * c.sum) mass += c.probs[n++];
    c.keep = std::max(n, 1);
    c.sum = mass;
  }
  return c;
}

int32_t argmax(const float* logits, int vocab_size) {  // ties go to the lowest id
  return static_cast<int32_t>(std::max_element(logits, logits + vocab_size) - logits);
}

}  // namespace

int32_t sample_token(const float* logits, int vocab_size, const SamplingParams& params, int64_t request_id,
                     int position) {
  if (params.temperature <= 0.0f) return argmax(logits, vocab_size);
  const Candidates c = candidates(logits, vocab_size, params);
  Rng rng(mix_seed(mix_seed(params.seed, static_cast<uint64_t>(request_id)), static_cast<uint64_t>(position)));
  const double u = rng.uniform() * c.sum;
  double acc = 0.0;
  for (int i = 0; i < c.keep; ++i) {
    acc += c.probs[i];
    if (u < acc) return c.ids[i];
  }
  return c.ids[c.keep - 1];
}

void token_distribution(const float* logits, int vocab_size, const SamplingParams& params, float* probs) {
  std::fill(probs, probs + vocab_size, 0.0f);
  if (params.temperature <= 0.0f) {
    probs[argmax(logits, vocab_size)] = 1.0f;
    return;
  }
  const Candidates c = candidates(logits, vocab_size, params);
  for (int i = 0; i < c.keep; ++i) probs[c.ids[i]] = static_cast<float>(c.probs[i] / c.sum);
}

int verify_drafts(const ScheduledSeq& item, const int32_t* target, int32_t* out) {
  const std::vector<int32_t>& drafts = item.seq->draft_tokens();
  int n = 0;
  while (n < item.num_draft && target[n] == drafts[n]) {
    out[n] = target[n];
    ++n;
  }
  out[n] = target[n];
  return n + 1;
}

void sample_verified(const Batch& batch, const std::vector<int32_t>& logit_indptr, int vocab_size,
                     const std::function<const float*(int row)>& logits,
                     const std::function<int32_t(int row)>& argmax, StepResult& result) {
  result.reserve(batch.items.size());
  if (batch.want_probs) {
    result.vocab_size = vocab_size;
    result.probs.resize(static_cast<size_t>(logit_indptr.back()) * vocab_size);
    result.prob_offsets = logit_indptr;
  }
  std::vector<int32_t> target, out;
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const ScheduledSeq& item = batch.items[s];
    const int first = logit_indptr[s], rows = logit_indptr[s + 1] - first;
    if (rows == 0) {
      result.add_none();
      continue;
    }
    const SamplingParams& sp = item.seq->request().sampling;
    const int known = item.num_computed + item.num_new - item.num_draft;  // index of the first token sampled
    target.resize(rows);
    out.resize(rows);
    for (int j = 0; j < rows; ++j) {
      const int row = first + j;
      if (argmax && sp.temperature <= 0.0f && !batch.want_probs) {
        target[j] = argmax(row);
        continue;
      }
      const float* l = logits(row);
      target[j] = sample_token(l, vocab_size, sp, item.seq->id(), known + j);
      if (batch.want_probs) token_distribution(l, vocab_size, sp, &result.probs[static_cast<size_t>(row) * vocab_size]);
    }
    result.add_item(out.data(), verify_drafts(item, target.data(), out.data()));
  }
}

}  // namespace testbed
