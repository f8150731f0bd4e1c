// Zipf sampling (see zipf_sampler.h). The table is n doubles: a pool of a
// million documents costs 8 MB, drawn by binary search.
#include "traces/zipf_sampler.h"

#include <algorithm>
#include <cmath>

namespace testbed {

ZipfSampler::ZipfSampler(int64_t num_items, double s) {
  cdf_.resize(static_cast<size_t>(num_items));
  double total = 0;
  for (int64_t r = 0; r < num_items; ++r) cdf_[r] = (total += std::pow(static_cast<double>(r + 1), -s));
  for (double& c : cdf_) c /= total;
  cdf_.back() = 1.0;
}

double ZipfSampler::probability(int64_t rank) const { return cdf_[rank] - (rank > 0 ? cdf_[rank - 1] : 0.0); }

int64_t ZipfSampler::locate(double x) const {
  const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), x);
  return std::min<int64_t>(it - cdf_.begin(), static_cast<int64_t>(cdf_.size()) - 1);
}

int64_t ZipfSampler::draw(Rng& rng) const { return locate(rng.uniform()); }

std::vector<int64_t> ZipfSampler::draw_distinct(Rng& rng, int k) const {
  std::vector<int64_t> drawn, sorted;  // `sorted`: drawn items by rank, to skip their intervals
  double drawn_mass = 0;
  for (int i = 0; i < k; ++i) {
    // A point in the mass left, mapped onto the full CDF by stepping over the
    // intervals of items already drawn (in rank order): exact, no rejection loop.
    double x = rng.uniform() * (1.0 - drawn_mass);
    for (int64_t r : sorted) {
      if (r > 0 && cdf_[r - 1] > x) break;
      x += probability(r);
    }
    int64_t item = locate(x);
    // Rounding can land on a drawn item at an interval edge: take the next free one.
    while (std::binary_search(sorted.begin(), sorted.end(), item))
      item = (item + 1) % static_cast<int64_t>(cdf_.size());
    drawn.push_back(item);
    sorted.insert(std::upper_bound(sorted.begin(), sorted.end(), item), item);
    drawn_mass += probability(item);
  }
  return drawn;
}

}  // namespace testbed
