// The benchmarks' random fill (kernels/common/fill.h): a value depends on
// (seed, index) only, lies in [lo, hi), and looks uniform.
#include <catch2/catch.hpp>

#include "kernels/common/fill.h"

using namespace testbed;

TEST_CASE("fill_uniform is a deterministic uniform draw per (seed, index)", "[fill]") {
  double sum = 0, sum2 = 0;
  int below_half = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float v = fill_uniform(7, static_cast<uint64_t>(i), -1.0f, 1.0f);
    REQUIRE(v >= -1.0f);
    REQUIRE(v < 1.0f);
    sum += v;
    sum2 += double(v) * v;
    below_half += v < -0.5f;
  }
  CHECK(sum / n == Approx(0.0).margin(0.01));
  CHECK(sum2 / n == Approx(1.0 / 3).epsilon(0.01));  // variance of U(-1, 1)
  CHECK(below_half / double(n) == Approx(0.25).margin(0.005));
  CHECK(fill_uniform(7, 12345, -1, 1) == fill_uniform(7, 12345, -1, 1));
  CHECK(fill_uniform(7, 12345, -1, 1) != fill_uniform(8, 12345, -1, 1));
  CHECK(fill_uniform(7, 12345, -1, 1) != fill_uniform(7, 12346, -1, 1));
}
