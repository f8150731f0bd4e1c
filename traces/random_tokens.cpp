// The bulk token generator behind append_random_tokens (traces/random_tokens.h).
#include "traces/random_tokens.h"

// GCC 12+ on x86-64 builds the x86-64-v4 copy (clang before 18 mis-dispatches such copies).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define TESTBED_AVX512_TOKENS 1
#else
#define TESTBED_AVX512_TOKENS 0
#endif

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

using TokenFill = void (*)(uint64_t, int64_t, int, int32_t*);

#if TESTBED_AVX512_TOKENS
// The same loop compiled for x86-64-v4: 64-bit lane multiplies and int64 ->
// double conversions (AVX-512DQ), eight tokens an instruction.
__attribute__((target("arch=x86-64-v4"))) void fill_v4(uint64_t state, int64_t n, int vocab_size, int32_t* out) {
  const double vocab = static_cast<double>(vocab_size);
  for (int64_t i = 0; i < n; ++i) out[i] = token_at(state, i, vocab);
}
#endif

TokenFill pick_fill() {
#if TESTBED_AVX512_TOKENS
  if (uniform_tokens_v4_available()) return fill_v4;
#endif
  return uniform_tokens_portable;
}

}  // namespace

void uniform_tokens_portable(uint64_t state, int64_t n, int vocab_size, int32_t* out) {
  const double vocab = static_cast<double>(vocab_size);
  for (int64_t i = 0; i < n; ++i) out[i] = token_at(state, i, vocab);
}

bool uniform_tokens_v4_available() {
#if TESTBED_AVX512_TOKENS
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512cd");
#else
  return false;
#endif
}

void uniform_tokens_v4(uint64_t state, int64_t n, int vocab_size, int32_t* out) {
#if TESTBED_AVX512_TOKENS
  if (uniform_tokens_v4_available()) return fill_v4(state, n, vocab_size, out);
#endif
  uniform_tokens_portable(state, n, vocab_size, out);
}

void uniform_tokens(uint64_t state, int64_t n, int vocab_size, int32_t* out) {
  static const TokenFill fill = pick_fill();  // once: the CPU does not change
  fill(state, n, vocab_size, out);
}

}  // namespace testbed
