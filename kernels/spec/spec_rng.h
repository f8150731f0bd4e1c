// Counter-based random numbers for speculative verification: one uniform in
// [0, 1) per (seed, request, position, stream), computed from those four alone,
// so the CPU reference and a GPU kernel draw the same number for the same
// decision whatever the batch or the thread that makes it. splitmix64 (Steele,
// Lea, Flood 2014) mixes the counter, as engine/common/rng.h does for sampling;
// it is restated here because kernels/ sits below engine/.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TESTBED_HD __host__ __device__ __forceinline__
#else
#define TESTBED_HD inline
#endif

namespace testbed {

// Streams of one position: the accept test of the draft token there, and the
// draw of the token emitted there (from the residual or, as a bonus, from p).
enum SpecStream : uint64_t { kSpecAccept = 1, kSpecSample = 2 };

TESTBED_HD uint64_t spec_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

TESTBED_HD double spec_uniform(uint64_t seed, int64_t request, int64_t position, uint64_t stream) {
  const uint64_t h = spec_mix(spec_mix(spec_mix(seed) ^ static_cast<uint64_t>(request)) ^ static_cast<uint64_t>(position)) ^
                     stream;
  return static_cast<double>(spec_mix(h) >> 11) * 0x1.0p-53;
}

}  // namespace testbed
