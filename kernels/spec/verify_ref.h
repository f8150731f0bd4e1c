// Speculative verification's rules and CPU references (the CUDA kernel is
// declared in kernels/spec/verify.h). After Leviathan, Kalman, Matias (ICML
// 2023) and Chen et al. (2023): a proposer drafted k tokens for a sequence;
// the target scored all k + 1 positions in one step; keep the longest
// acceptable prefix of the draft and emit one more token, so a step yields
// 1 .. k + 1 tokens.
//
// A batch holds sequences with different k (CSR over draft tokens):
//   draft_offsets  [num_seqs + 1]        sequence i drafted tokens draft_tokens[draft_offsets[i] .. draft_offsets[i+1])
//   draft_tokens   [total_draft]
//   target_probs   [total_draft + num_seqs, vocab]  sequence i's k_i + 1 rows start at row draft_offsets[i] + i:
//                                        row j is the target's distribution for the token after draft j - 1
//                                        (row 0: after the last accepted token; row k_i: the bonus position)
//   draft_probs    [total_draft, vocab]  row draft_offsets[i] + j: the distribution draft j was sampled from
//                                        (rejection sampling only)
//   seeds, request_ids, positions [num_seqs]: the random numbers of sequence i at its j-th row are
//                                        spec_uniform(seeds[i], request_ids[i], positions[i] + j, stream)
// Output:
//   num_accepted   [num_seqs]            draft tokens kept (0 .. k_i)
//   out_tokens     [total_draft + num_seqs]  sequence i writes num_accepted[i] + 1 tokens from slot
//                                        draft_offsets[i] + i: the kept drafts, then the emitted token
//
// Greedy: keep draft j while it is the target's argmax at row j (ties to the
// lowest id); emit the argmax at the first mismatch, or at row k_i. The output
// is exactly greedy decoding of the target.
//
// Rejection sampling: keep draft x at row j when u * q(x) < p(x), u =
// spec_uniform(.., kSpecAccept) (that is, with probability min(1, p(x) / q(x));
// a draft with q(x) = 0 is kept iff p(x) > 0). At the first rejection emit a
// token drawn from norm(max(0, p - q)) (from p if that is all zero, which only
// rounding can cause); with every draft kept, emit a bonus token drawn from
// row k_i. Draws invert the CDF (sums in double, token ids ascending) at u =
// spec_uniform(.., kSpecSample). If each draft was sampled from its q, every
// emitted token is distributed as the target's p: the output follows the
// target's distribution.
#pragma once

#include <cstdint>

namespace testbed {

struct VerifyBatch {
  int num_seqs = 0;
  int vocab = 0;
  const int32_t* draft_offsets = nullptr;
  const int32_t* draft_tokens = nullptr;
  const float* target_probs = nullptr;
  const float* draft_probs = nullptr;  // rejection sampling only
  const uint64_t* seeds = nullptr;     // rejection sampling only
  const int64_t* request_ids = nullptr;
  const int32_t* positions = nullptr;
};

struct VerifyOutput {
  int32_t* num_accepted = nullptr;
  int32_t* out_tokens = nullptr;
};

// CPU references (kernels/spec/verify_ref.cpp; the engine verifies with them). Throw std::invalid_argument
// for a draft token outside [0, vocab) or a malformed batch.
void verify_greedy_ref(const VerifyBatch& batch, const VerifyOutput& out);
void verify_rejection_ref(const VerifyBatch& batch, const VerifyOutput& out);

// One draw from probabilities `p[0 .. vocab)` (not necessarily normalised) at
// uniform u: the first id whose running sum exceeds u * total (sums in double).
int32_t sample_from_probs_ref(const float* p, int vocab, double u);

}  // namespace testbed
