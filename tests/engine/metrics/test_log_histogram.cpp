// LogHistogram: count and mean are exact; quantiles of 100k seeded log-normal
// samples are within the bin width (at most 0.8%; 1% allowed) of the exact
// sorted-sample quantile; a lone value comes back within half a bin; empty gives
// NaN; values below 2^-30 (and non-positive ones) land in the lowest bin and
// values at or above 2^20 in the highest; quantile is monotone in q.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/common/rng.h"
#include "engine/metrics/log_histogram.h"

using namespace testbed;

namespace {

// numpy-style (linear) quantile of a sorted sample, q in [0, 1].
double exact_quantile(const std::vector<double>& sorted, double q) {
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double rel_err(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

const double kLowest = std::ldexp(1.0, LogHistogram::kMinExp);   // 2^-30
const double kHighest = std::ldexp(1.0, LogHistogram::kMaxExp);  // 2^20

}  // namespace

TEST_CASE("an empty log histogram has count 0 and NaN mean and quantiles", "[metrics][log_histogram]") {
  LogHistogram h;
  CHECK(h.count() == 0);
  CHECK(std::isnan(h.mean()));
  for (double q : {0.0, 0.5, 0.99, 1.0}) CHECK(std::isnan(h.quantile(q)));
}

TEST_CASE("log histogram count and mean are exact", "[metrics][log_histogram]") {
  LogHistogram h;
  const std::vector<double> v = {0.5, 0.25, 2.0, 0.125, 8.0, 1.0, 0.0625, 3.0};  // exact binary sum: 14.9375
  for (double x : v) h.add(x);
  CHECK(h.count() == 8);
  CHECK(h.mean() == 14.9375 / 8.0);  // 1.8671875

  // Many values: the mean is the plain sum over the count, not a bin estimate.
  LogHistogram g;
  Rng rng(11);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double x = 0.001 + rng.uniform();
    g.add(x);
    sum += x;
  }
  CHECK(g.count() == 10000);
  CHECK(g.mean() == sum / 10000);
}

TEST_CASE("log histogram quantiles of log-normal samples are within the bin width", "[metrics][log_histogram]") {
  for (uint64_t seed : {1ULL, 2ULL, 3ULL}) {
    Rng rng(seed);
    LogHistogram h;
    std::vector<double> v;
    const int n = 100000;
    v.reserve(n);
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      const double x = 0.02 * std::exp(1.0 * rng.normal());  // median 20 ms, sigma 1
      v.push_back(x);
      h.add(x);
      sum += x;
    }
    std::sort(v.begin(), v.end());
    CHECK(h.count() == n);
    CHECK(h.mean() == sum / n);
    for (double q : {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0}) {
      const double want = exact_quantile(v, q);
      INFO("seed " << seed << " q " << q << " histogram " << h.quantile(q) << " exact " << want);
      CHECK(rel_err(h.quantile(q), want) <= 0.01);
    }
    // The ends are the bins of the min and max: within half a bin (1/256).
    CHECK(rel_err(h.quantile(0.0), v.front()) <= 1.0 / 256 + 1e-12);
    CHECK(rel_err(h.quantile(1.0), v.back()) <= 1.0 / 256 + 1e-12);
  }
}

TEST_CASE("a lone value comes back within half a bin", "[metrics][log_histogram]") {
  // Across the whole binned range, including both edges of the range and of the
  // power-of-two boundaries.
  std::vector<double> values = {kLowest, 1e-9, 1e-6, 0.001, 0.999, 1.0, 1.0 + 1e-12, 1.5, 2.0,
                                3.999999, 1000.0, 1e6, std::nextafter(kHighest, 0.0)};
  Rng rng(5);
  for (int i = 0; i < 2000; ++i) values.push_back(std::ldexp(1.0 + rng.uniform(), -30 + static_cast<int>(rng.below(50))));
  for (double x : values) {
    LogHistogram h;
    h.add(x);
    for (double q : {0.0, 0.5, 1.0}) {
      INFO("value " << x << " q " << q << " histogram " << h.quantile(q));
      CHECK(rel_err(h.quantile(q), x) <= 1.0 / 256 + 1e-12);
    }
  }
  // A bin is at most 1/128 of its lower edge wide: 1.0 and 1.0078125 (= 1 + 1/128) differ.
  LogHistogram a, b;
  a.add(1.0);
  b.add(1.0 + 1.0 / 128);
  CHECK(a.quantile(0.5) < b.quantile(0.5));
}

TEST_CASE("quantile picks the right rank among well-separated values", "[metrics][log_histogram]") {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Rng rng(seed);
    // Distinct powers of two times a common factor: every value in its own bin.
    std::vector<double> v;
    const int n = 2 + static_cast<int>(rng.below(30));
    for (int i = 0; i < n; ++i) v.push_back(0.3 * std::ldexp(1.0, -20 + static_cast<int>(rng.below(35))));
    LogHistogram h;
    for (double x : v) h.add(x);
    std::sort(v.begin(), v.end());
    for (int step = 0; step <= 200; ++step) {
      const double q = step / 200.0;
      const double rank = q * (n - 1);
      const double lo = v[static_cast<size_t>(std::floor(rank))];
      const double hi = v[static_cast<size_t>(std::ceil(rank))];
      const double got = h.quantile(q);
      INFO("seed " << seed << " q " << q << " histogram " << got << " ranks " << lo << " .. " << hi);
      // One of the two closest ranks, to within half a bin.
      CHECK(got >= lo * (1 - 1.0 / 256));
      CHECK(got <= hi * (1 + 1.0 / 256));
      CHECK((rel_err(got, lo) <= 1.0 / 256 + 1e-12 || rel_err(got, hi) <= 1.0 / 256 + 1e-12));
    }
  }
}

TEST_CASE("values below 2^-30 and non-positive values land in the lowest bin", "[metrics][log_histogram]") {
  LogHistogram h;
  const std::vector<double> low = {0.0, -0.0, -1.0, -1e300, 1e-12, std::nextafter(kLowest, 0.0),
                                   std::numeric_limits<double>::denorm_min(), -INFINITY};
  for (double x : low) h.add(x);
  CHECK(h.count() == static_cast<int64_t>(low.size()));
  const double bottom = h.quantile(0.5);
  CHECK(bottom <= kLowest);
  CHECK(bottom > 0);
  for (double q : {0.0, 0.25, 1.0}) CHECK(h.quantile(q) == bottom);  // all in one bin

  // 2^-30 itself is binned normally, above the lowest bin.
  LogHistogram edge;
  edge.add(kLowest);
  CHECK(edge.quantile(0.5) > bottom);

  // Mixed with ordinary values, the low ones are the bottom of the distribution.
  LogHistogram mixed;
  mixed.add(-5.0);
  mixed.add(0.0);
  mixed.add(0.5);
  mixed.add(1.0);
  CHECK(mixed.quantile(0.0) == bottom);
  CHECK(mixed.quantile(1.0 / 3) == bottom);
  CHECK(rel_err(mixed.quantile(1.0), 1.0) <= 1.0 / 256);
  CHECK(mixed.mean() == Approx(-3.5 / 4));
}

TEST_CASE("values at or above 2^20 land in the highest bin", "[metrics][log_histogram]") {
  LogHistogram h;
  const std::vector<double> high = {kHighest, 1.5 * kHighest, 1e7, 1e100, 1e308, INFINITY};
  for (double x : high) h.add(x);
  CHECK(h.count() == static_cast<int64_t>(high.size()));
  const double top = h.quantile(0.5);
  CHECK(std::isfinite(top));
  CHECK(top >= kHighest);
  for (double q : {0.0, 0.75, 1.0}) CHECK(h.quantile(q) == top);  // all in one bin

  // Just below 2^20 is binned normally, under the highest bin.
  LogHistogram below;
  below.add(std::nextafter(kHighest, 0.0));
  CHECK(below.quantile(0.5) < top);

  // The lowest and highest bins are the two ends of a mixed histogram.
  LogHistogram mixed;
  mixed.add(1e9);
  mixed.add(-1.0);
  mixed.add(1.0);
  CHECK(mixed.quantile(0.0) <= kLowest);
  CHECK(mixed.quantile(1.0) == top);
  CHECK(rel_err(mixed.quantile(0.5), 1.0) <= 1.0 / 256);
}

TEST_CASE("log histogram quantile is monotone in q", "[metrics][log_histogram]") {
  Rng rng(21);
  LogHistogram h;
  for (int i = 0; i < 20000; ++i) {
    // A wide mixture: log-normal, a few zeros, a few huge values.
    const double u = rng.uniform();
    h.add(u < 0.01 ? 0.0 : u > 0.995 ? 1e7 : std::exp(3.0 * rng.normal() - 4.0));
  }
  double prev = -INFINITY;
  for (int step = 0; step <= 10000; ++step) {
    const double got = h.quantile(step / 10000.0);
    CHECK(got >= prev);
    prev = got;
  }
}
