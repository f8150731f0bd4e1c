// percentile(): linear interpolation between closest ranks (numpy's default,
// p on the 0-100 scale), against values numpy.percentile gives; p=0 and p=100
// are the min and max; NaN for no values; and, over random inputs, exact order
// statistics at p = 100 k / (n - 1), bounds, and monotonicity in p.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/common/rng.h"
#include "engine/metrics/summary.h"

using namespace testbed;

namespace {

Approx near(double x) { return Approx(x).epsilon(1e-12).margin(1e-12); }

}  // namespace

TEST_CASE("percentile matches numpy's linear interpolation", "[metrics][percentile]") {
  // Each expected value is numpy.percentile(values, p).
  CHECK(percentile({1, 2, 3, 4}, 50) == near(2.5));
  CHECK(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90) == near(9.1));
  CHECK(percentile({1, 2, 3, 4}, 99) == near(3.97));
  CHECK(percentile({1, 2, 3, 4}, 25) == near(1.75));
  CHECK(percentile({10, 20}, 33) == near(13.3));
  CHECK(percentile({-3, -1, 0, 7}, 60) == near(-0.2));
  CHECK(percentile({1, 2, 3, 4, 5}, 50) == near(3.0));  // odd count: the middle value
  CHECK(percentile({0.5, 1.5}, 50) == near(1.0));
}

TEST_CASE("percentile of unsorted input is that of the sorted input", "[metrics][percentile]") {
  CHECK(percentile({5, 1, 4, 2, 3}, 25) == near(2.0));
  CHECK(percentile({4, 3, 2, 1}, 50) == near(2.5));
  CHECK(percentile({10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 90) == near(9.1));
  CHECK(percentile({7, -3, 0, -1}, 60) == near(-0.2));
}

TEST_CASE("percentile at p=0 is the minimum and at p=100 the maximum", "[metrics][percentile]") {
  const std::vector<double> v = {3.25, -8.5, 11.0, 0.0, 2.0, 11.0, -8.5};
  CHECK(percentile(v, 0) == -8.5);
  CHECK(percentile(v, 100) == 11.0);
  CHECK(percentile({42.0, 7.0}, 0) == 7.0);
  CHECK(percentile({42.0, 7.0}, 100) == 42.0);
}

TEST_CASE("percentile of a single value is that value at every p", "[metrics][percentile]") {
  for (double p : {0.0, 1.0, 25.0, 50.0, 90.0, 99.9, 100.0}) CHECK(percentile({3.5}, p) == 3.5);
}

TEST_CASE("percentile with duplicates", "[metrics][percentile]") {
  // numpy.percentile([1, 2, 2, 2, 9], p) for p = 25, 50, 75, 90.
  const std::vector<double> v = {2, 9, 2, 1, 2};
  CHECK(percentile(v, 25) == near(2.0));
  CHECK(percentile(v, 50) == near(2.0));
  CHECK(percentile(v, 75) == near(2.0));
  CHECK(percentile(v, 90) == near(6.2));
  for (double p : {0.0, 37.0, 100.0}) CHECK(percentile({4, 4, 4, 4}, p) == 4.0);
}

TEST_CASE("percentile of no values is NaN", "[metrics][percentile]") {
  for (double p : {0.0, 50.0, 100.0}) CHECK(std::isnan(percentile({}, p)));
}

TEST_CASE("percentile skips NaN values", "[metrics][percentile]") {
  // TPOT is NaN for one-token outputs; the summary's distributions ignore those.
  CHECK(percentile({1, NAN, 3}, 50) == near(2.0));
  CHECK(percentile({NAN, 4, NAN, 1, 2, 3}, 50) == near(2.5));
  CHECK(percentile({NAN, 5.0}, 0) == 5.0);
  CHECK(std::isnan(percentile({NAN, NAN}, 50)));
}

TEST_CASE("percentile over random inputs: order statistics, bounds, monotone in p",
          "[metrics][percentile][property]") {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    const size_t n = 1 + static_cast<size_t>(rng.below(60));
    std::vector<double> v(n);
    for (double& x : v) x = std::floor(rng.uniform() * 100.0) - 50.0 + 0.25 * rng.normal();
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());

    // p = 100 k / (n - 1) lands on rank k exactly: the k-th smallest value.
    if (n > 1)
      for (size_t k = 0; k < n; ++k) {
        const double p = 100.0 * static_cast<double>(k) / static_cast<double>(n - 1);
        CHECK(percentile(v, p) == near(sorted[k]));
      }
    // Elsewhere: the linear interpolation between the two closest ranks (brute force).
    double prev = -INFINITY;
    for (int step = 0; step <= 1000; ++step) {
      const double p = step * 0.1;
      const double got = percentile(v, p);
      const double rank = p / 100.0 * static_cast<double>(n - 1);
      const size_t lo = static_cast<size_t>(rank);
      const size_t hi = std::min(lo + 1, n - 1);
      const double frac = rank - static_cast<double>(lo);
      CHECK(got == near((1.0 - frac) * sorted[lo] + frac * sorted[hi]));
      CHECK(got >= sorted.front());
      CHECK(got <= sorted.back());
      CHECK(got >= prev - 1e-12);
      prev = got;
    }
  }
}

TEST_CASE("percentiles by selection are a sorted copy's interpolations, bit for bit", "[metrics][percentile]") {
  // The reference: sort, then interpolate between floor(rank) and the next.
  auto by_sort = [](std::vector<double> v, double p) {
    v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
    if (v.empty()) return static_cast<double>(NAN);
    std::sort(v.begin(), v.end());
    const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(rank)), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  Rng rng(11);
  for (int round = 0; round < 3000; ++round) {
    std::vector<double> v(rng.below(round < 100 ? 5 : 300));
    const int distinct = 1 + static_cast<int>(rng.below(40));  // ties, often
    for (double& x : v) x = rng.below(8) == 0 ? NAN : static_cast<double>(rng.below(distinct)) * 0.37 - 3;
    const std::vector<double> q = percentiles(v, {0, 50, 90, 95, 99, 99.9, 100});
    const double ps[] = {0, 50, 90, 95, 99, 99.9, 100};
    for (int i = 0; i < 7; ++i) {
      const double want = by_sort(v, ps[i]);
      INFO("round " << round << ", " << v.size() << " values, p" << ps[i]);
      if (std::isnan(want))
        CHECK(std::isnan(q[i]));
      else
        REQUIRE(q[i] == want);  // exact, not approximate
    }
    // The same p twice, and adjacent ranks, read the order statistics already placed.
    const std::vector<double> twice = percentiles(v, {50, 50, 51});
    if (!std::isnan(by_sort(v, 50))) {
      CHECK(twice[0] == by_sort(v, 50));
      CHECK(twice[1] == by_sort(v, 50));
      CHECK(twice[2] == by_sort(v, 51));
    }
  }
}
