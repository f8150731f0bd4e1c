// Arrival processes and Zipf popularity: the statistics the generators rely on,
// checked over many seeded samples.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "traces/arrivals.h"
#include "traces/zipf_sampler.h"

using namespace testbed;

namespace {

struct GapStats {
  double mean, cv2;
};

GapStats gap_stats(const std::string& kind, double rate, double burstiness, int n) {
  ArrivalProcess p(kind, rate, burstiness, 12345);
  double prev = p.next(), sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double t = p.next(), gap = t - prev;
    prev = t;
    sum += gap;
    sum2 += gap * gap;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  return {mean, var / (mean * mean)};
}

}  // namespace

TEST_CASE("workload arrival processes have the configured mean rate and variability", "[traces]") {
  // 200,000 gaps: the sample mean's relative error is ~CV / sqrt(n) = 0.2% (Poisson)
  // and 0.5% (CV^2 = 4); the tolerances are several standard errors wide.
  const int n = 200000;
  const GapStats poisson = gap_stats("poisson", 8.0, 1.0, n);
  CHECK(poisson.mean == Approx(1.0 / 8.0).epsilon(0.01));
  CHECK(poisson.cv2 == Approx(1.0).epsilon(0.03));
  for (double shape : {0.25, 0.5, 2.0, 4.0}) {
    INFO("gamma shape " << shape);
    const GapStats gamma = gap_stats("gamma", 3.0, shape, n);
    CHECK(gamma.mean == Approx(1.0 / 3.0).epsilon(0.02));
    CHECK(gamma.cv2 == Approx(1.0 / shape).epsilon(0.06));
  }
  const GapStats constant = gap_stats("constant", 5.0, 1.0, 1000);
  CHECK(constant.mean == Approx(0.2));
  CHECK(constant.cv2 == Approx(0.0).margin(1e-9));
}

TEST_CASE("workload arrival processes start at zero and rate zero keeps everything there", "[traces]") {
  ArrivalProcess p("poisson", 2.0, 1.0, 1);
  CHECK(p.next() == 0.0);
  CHECK(p.next() > 0.0);
  ArrivalProcess offline("gamma", 0.0, 0.5, 1);
  for (int i = 0; i < 5; ++i) CHECK(offline.next() == 0.0);
  try {
    ArrivalProcess bad("weibull", 1.0, 1.0, 1, "trace.arrivals");
    FAIL("no error");
  } catch (const std::exception& e) {
    CHECK_THAT(std::string(e.what()), Catch::StartsWith("trace.arrivals: "));
  }
}

TEST_CASE("workload zipf sampler follows 1 over rank to the s", "[traces]") {
  const ZipfSampler zipf(100, 1.0);
  double h = 0;
  for (int r = 1; r <= 100; ++r) h += 1.0 / r;
  CHECK(zipf.probability(0) == Approx(1.0 / h));
  CHECK(zipf.probability(9) == Approx(0.1 / h));
  Rng rng(7);
  std::vector<int> counts(100, 0);
  const int n = 200000;
  for (int i = 0; i < n; ++i) ++counts[zipf.draw(rng)];
  CHECK(counts[0] / double(n) == Approx(zipf.probability(0)).epsilon(0.02));
  CHECK(counts[1] / double(n) == Approx(zipf.probability(1)).epsilon(0.03));
  CHECK(counts[9] / double(n) == Approx(zipf.probability(9)).epsilon(0.06));
  const ZipfSampler uniform(10, 0.0);
  CHECK(uniform.probability(3) == Approx(0.1));
}

TEST_CASE("workload zipf distinct draws are distinct and renormalise over what is left", "[traces]") {
  const ZipfSampler zipf(5, 1.2);
  Rng rng(3);
  std::vector<int> second(5, 0);
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const auto d = zipf.draw_distinct(rng, 5);
    std::vector<int64_t> sorted(d.begin(), d.end());
    std::sort(sorted.begin(), sorted.end());
    if (sorted != std::vector<int64_t>{0, 1, 2, 3, 4}) FAIL("draw " << i << " repeated an item");
    if (d[0] == 0) ++second[d[1]];
  }
  // Given the first draw was item 0, the second is item r with p(r) / (1 - p(0)).
  int first_zero = 0;
  for (int c : second) first_zero += c;
  CHECK(first_zero / double(n) == Approx(zipf.probability(0)).epsilon(0.02));
  for (int r = 1; r < 5; ++r)
    CHECK(second[r] / double(first_zero) == Approx(zipf.probability(r) / (1 - zipf.probability(0))).epsilon(0.05));
}
