// Token sampling: greedy, or temperature with top-k and top-p. Every draw is
// seeded by (params.seed, request id, position), so a sequence samples the same
// tokens whatever batch it rides in and however often it is preempted.
//
// Proposed tokens are verified against the target's own draw at each verified
// position: a draft is accepted while it equals the token the target samples
// there. For greedy requests that is greedy verification; for sampled ones the
// output is exactly the non-speculative output (same seeded draws), so the
// target distribution is kept. Rejection sampling (accept with min(1, p/q);
// spec.verify = rejection) needs the proposer's probabilities too: the
// SpeculativeExecutor asks for Batch::want_probs and replaces these tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/batch.h"
#include "engine/request.h"

namespace testbed {

// The token for output position `position` (its index in the sequence).
int32_t sample_token(const float* logits, int vocab_size, const SamplingParams& params, int64_t request_id,
                     int position);

// The distribution sample_token draws from, into probs[vocab_size]: one-hot
// on the argmax when greedy, else softmax(logits / T) cut to top-k and top-p
// and renormalised.
void token_distribution(const float* logits, int vocab_size, const SamplingParams& params, float* probs);

// The tokens a sampling item appends, from target[j] = the target's token at
// its j-th verified position (j = 0 .. num_draft): the drafts that match, then
// the target's token at the first mismatch (or after the last draft). Writes
// them to `out` and returns how many.
int verify_drafts(const ScheduledSeq& item, const int32_t* target, int32_t* out);

// What every executor does after its forward pass: for each sampling item of
// `batch`, the target's token at each of its verified positions, then
// verify_drafts, appended to `result` (and, with batch.want_probs, each
// position's distribution). Item i's verified rows are
// logit_indptr[i] .. logit_indptr[i + 1] (FlatBatch::logit_indptr);
// `logits(row)` gives a row's logits; `argmax(row)`, when set, gives a
// greedy row's token without reading its logits (a device-side argmax).
void sample_verified(const Batch& batch, const std::vector<int32_t>& logit_indptr, int vocab_size,
                     const std::function<const float*(int row)>& logits,
                     const std::function<int32_t(int row)>& argmax, StepResult& result);

}  // namespace testbed
