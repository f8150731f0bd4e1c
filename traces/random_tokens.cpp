// The bulk token generator behind append_random_tokens (traces/random_tokens.h).
#include "traces/random_tokens.h"

namespace testbed {
namespace {

// Draw i of a splitmix64 stream at `state`, as Rng::below(vocab) maps it.
inline int32_t token_at(uint64_t state, int64_t i, double vocab) {
  uint64_t z = state + static_cast<uint64_t>(i + 1) * kSplitmixGamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  // Rng::uniform() * n, truncated: z >> 11 < 2^53, so the signed conversion is exact.
  const double u = static_cast<double>(static_cast<int64_t>(z >> 11)) * 0x1.0p-53;
  return static_cast<int32_t>(u * vocab);
}

}  // namespace

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// 64-bit lane multiplies and int64 <-> double conversions need AVX-512DQ;
// the loader picks the copy this CPU runs (GNU ifunc).
__attribute__((target_clones("arch=x86-64-v4", "default")))
#endif
void uniform_tokens(uint64_t state, int64_t n, int vocab_size, int32_t* out) {
  const double vocab = static_cast<double>(vocab_size);
  for (int64_t i = 0; i < n; ++i) out[i] = token_at(state, i, vocab);
}

}  // namespace testbed
