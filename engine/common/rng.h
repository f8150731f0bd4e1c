// Small, portable, seeded random numbers (splitmix64). The standard library's
// distributions differ between implementations; these give the same draws on
// every platform, which "same config and seed, same results" needs.
#pragma once

#include <cmath>
#include <cstdint>

namespace testbed {

constexpr uint64_t kSplitmixGamma = 0x9E3779B97F4A7C15ULL;

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += kSplitmixGamma);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A seed derived from a parent seed and a stream id (request id, tensor index...).
inline uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  uint64_t s = seed ^ (stream * 0xD1B54A32D192ED03ULL + 0x632BE59BD9B4E019ULL);
  return splitmix64(s);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() { return splitmix64(state_); }
  // The generator's position, and a jump past n draws: bulk generators
  // (traces/random_tokens.h) compute draw i from the state directly.
  uint64_t state() const { return state_; }
  void skip(uint64_t n) { state_ += n * kSplitmixGamma; }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>(uniform() * static_cast<double>(n)); }
  double normal() {  // Box-Muller; one value per call keeps the stream simple
    double u1 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double exponential(double rate) { return -std::log(1.0 - uniform()) / rate; }
  // Gamma(shape, scale) by Marsaglia and Tsang (shape < 1 boosted).
  double gamma(double shape, double scale) {
    if (shape < 1.0) return gamma(shape + 1.0, scale) * std::pow(uniform() + 1e-300, 1.0 / shape);
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = uniform();
      if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
      if (std::log(u + 1e-300) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * scale;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace testbed
