// ZipfSampler: item ranks 0..n-1 with P(rank r) proportional to 1 / (r + 1)^s
// (s = 0: uniform), the popularity law of documents and keys in caching
// studies. Draws k distinct items exactly (sampling without replacement by
// renormalising over the items not yet drawn), with the project's Rng.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/common/rng.h"

namespace testbed {

class ZipfSampler {
 public:
  ZipfSampler(int64_t num_items, double s);
  int64_t draw(Rng& rng) const;
  // `k` distinct items in draw order (k <= num_items).
  std::vector<int64_t> draw_distinct(Rng& rng, int k) const;
  double probability(int64_t rank) const;

 private:
  // Index of the item whose CDF interval holds x in [0, 1).
  int64_t locate(double x) const;
  std::vector<double> cdf_;  // cdf_[r] = P(rank <= r); cdf_.back() == 1
};

}  // namespace testbed
