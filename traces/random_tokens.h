// Random token content for synthetic prompts. Contents are drawn from the
// project's portable Rng so that the same seed gives the same tokens everywhere;
// any two independently drawn spans of 16 tokens differ with overwhelming
// probability, so they never share a prefix-cache block by accident.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/common/rng.h"

namespace testbed {

// Appends `n` tokens drawn uniformly from [0, vocab_size). Callers reserve the
// whole prompt (and its output: the engine appends generated tokens to it).
inline void append_random_tokens(std::vector<int32_t>& out, Rng& rng, int64_t n, int vocab_size) {
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_size))));
}

// Appends `n` tokens of the span identified by (seed, span_id): the same span
// id always gives the same tokens, and a shorter span is a prefix of a longer one.
inline void append_span_tokens(std::vector<int32_t>& out, uint64_t seed, uint64_t span_id, int64_t n, int vocab_size) {
  Rng rng(mix_seed(seed, span_id));
  append_random_tokens(out, rng, n, vocab_size);
}

}  // namespace testbed
