// A histogram with logarithmic bins (1% wide) for quantiles of values too many to
// keep, such as every inter-token gap of a long simulation. Quantiles are exact
// to the bin width.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace testbed {

class LogHistogram {
 public:
  LogHistogram(double min_value = 1e-7, double max_value = 1e5, double growth = 1.01)
      : log_min_(std::log(min_value)), log_growth_(std::log(growth)),
        counts_(static_cast<size_t>((std::log(max_value) - log_min_) / log_growth_) + 2, 0) {}

  void add(double v) {
    ++count_;
    sum_ += v;
    counts_[bin(v)] += 1;
  }
  int64_t count() const { return count_; }
  double mean() const { return count_ ? sum_ / count_ : NAN; }
  // Value at quantile q in [0, 1] (the geometric middle of its bin).
  double quantile(double q) const {
    if (count_ == 0) return NAN;
    const double target = q * static_cast<double>(count_ - 1);
    int64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (static_cast<double>(seen) > target) {
        if (i == 0) return std::exp(log_min_);
        return std::exp(log_min_ + (static_cast<double>(i) - 0.5) * log_growth_);
      }
    }
    return std::exp(log_min_ + (static_cast<double>(counts_.size()) - 1.5) * log_growth_);
  }

 private:
  size_t bin(double v) const {
    if (!(v > 0)) return 0;
    const double x = (std::log(v) - log_min_) / log_growth_ + 1.0;
    if (x < 1.0) return 0;
    const size_t i = static_cast<size_t>(x);
    return i < counts_.size() ? i : counts_.size() - 1;
  }
  double log_min_, log_growth_;
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace testbed
