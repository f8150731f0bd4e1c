// A histogram with logarithmic bins for quantiles of values too many to keep,
// such as every inter-token gap of a long simulation. Each power of two is cut
// into 128 linear bins, so a bin is at most 0.8% wide relative to its values;
// the bin comes from the float's exponent and mantissa bits, no log() per value.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace testbed {

class LogHistogram {
 public:
  static constexpr int kSubBins = 128;
  static constexpr int kMinExp = -30;  // 2^-30 s ~ 1 ns
  static constexpr int kMaxExp = 20;   // 2^20 s ~ 12 days

  LogHistogram() : counts_((kMaxExp - kMinExp) * kSubBins + 2, 0) {}

  void add(double v) {
    ++count_;
    sum_ += v;
    ++counts_[bin(v)];
  }
  int64_t count() const { return count_; }
  double mean() const { return count_ ? sum_ / count_ : NAN; }
  // Value at quantile q in [0, 1] (the middle of its bin).
  double quantile(double q) const {
    if (count_ == 0) return NAN;
    const double target = q * static_cast<double>(count_ - 1);
    int64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (static_cast<double>(seen) > target) return middle(i);
    }
    return middle(counts_.size() - 1);
  }

  // Calls f(value, count) for every non-empty bin, ascending (value: the bin's middle).
  template <class F>
  void for_each_bin(F f) const {
    for (size_t i = 0; i < counts_.size(); ++i)
      if (counts_[i] > 0) f(middle(i), counts_[i]);
  }

 private:
  // Bin 0: below 2^kMinExp (and non-positive); last bin: at or above 2^kMaxExp.
  static size_t bin(double v) {
    constexpr double kMinValue = 1.0 / (1LL << -kMinExp);  // 2^kMinExp
    if (!(v >= kMinValue)) return 0;
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    const int exp = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
    if (exp >= kMaxExp) return static_cast<size_t>((kMaxExp - kMinExp) * kSubBins + 1);
    const int sub = static_cast<int>((bits >> (52 - 7)) & (kSubBins - 1));  // top 7 mantissa bits
    return static_cast<size_t>((exp - kMinExp) * kSubBins + sub + 1);
  }
  static double middle(size_t i) {
    if (i == 0) return std::ldexp(1.0, kMinExp);
    const size_t k = i - 1;
    const int exp = static_cast<int>(k / kSubBins) + kMinExp;
    const double sub = static_cast<double>(k % kSubBins) + 0.5;
    return std::ldexp(1.0 + sub / kSubBins, exp);
  }
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace testbed
