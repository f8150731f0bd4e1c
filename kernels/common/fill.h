// Deterministic pseudo-random fill for benchmarks: element i of a buffer
// filled with seed s holds fill_uniform(s, i, lo, hi), computed from (s, i)
// alone (splitmix64), so the host can recompute any element without
// downloading it and check a kernel's output on random inputs.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TESTBED_FILL_HD __host__ __device__ __forceinline__
#else
#define TESTBED_FILL_HD inline
#endif

namespace testbed {

TESTBED_FILL_HD float fill_uniform(uint64_t seed, uint64_t i, float lo, float hi) {
  uint64_t x = seed ^ (i * 0x9E3779B97F4A7C15ull);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  const float u = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
  return lo + (hi - lo) * u;
}

}  // namespace testbed
