// Random token content for synthetic prompts. Contents are drawn from the
// project's portable Rng so that the same seed gives the same tokens everywhere;
// any two independently drawn spans of 16 tokens differ with overwhelming
// probability, so they never share a prefix-cache block by accident.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/common/rng.h"

namespace testbed {

// Writes the n tokens of n calls of rng.below(vocab_size) drawn from `state`
// (0 < vocab_size < 2^31) into out, without advancing anything. Every draw is
// a function of its index, so the loop has no chain from one token to the
// next and vectorises. Prompt contents were a tenth of a trace replay's time.
void uniform_tokens(uint64_t state, int64_t n, int vocab_size, int32_t* out);

// The copies uniform_tokens chooses between, once per process (tests run both):
// a portable one, and with GCC 12+ on x86-64 one compiled for x86-64-v4
// (AVX-512), taken when the CPU has it. Same values: integer arithmetic and
// conversions exact below 2^53. uniform_tokens_v4 runs the portable copy
// where the other is not available.
void uniform_tokens_portable(uint64_t state, int64_t n, int vocab_size, int32_t* out);
void uniform_tokens_v4(uint64_t state, int64_t n, int vocab_size, int32_t* out);
bool uniform_tokens_v4_available();

// Appends `n` tokens drawn uniformly from [0, vocab_size): the draws of n calls
// of rng.below(vocab_size), and rng is left where those calls leave it. Callers
// reserve the whole prompt (and its output: the engine appends generated tokens to it).
inline void append_random_tokens(std::vector<int32_t>& out, Rng& rng, int64_t n, int vocab_size) {
  constexpr int64_t kChunk = 512;  // through a buffer in L1: resize() would zero the memory first
  int32_t buf[kChunk];
  for (int64_t done = 0; done < n;) {
    const int64_t m = n - done < kChunk ? n - done : kChunk;
    uniform_tokens(rng.state(), m, vocab_size, buf);
    rng.skip(static_cast<uint64_t>(m));
    out.insert(out.end(), buf, buf + m);
    done += m;
  }
}

// Appends `n` tokens of the span identified by (seed, span_id): the same span
// id always gives the same tokens, and a shorter span is a prefix of a longer one.
inline void append_span_tokens(std::vector<int32_t>& out, uint64_t seed, uint64_t span_id, int64_t n, int vocab_size) {
  Rng rng(mix_seed(seed, span_id));
  append_random_tokens(out, rng, n, vocab_size);
}

}  // namespace testbed
