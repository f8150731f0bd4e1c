#include "experiments/sweep/bisection.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace testbed {

Bisection::Bisection(double low, double high, double tolerance, bool integer)
    : low_(low), high_(high), tolerance_(integer ? std::max(tolerance, 1.0) : tolerance), integer_(integer),
      lo_(low), hi_(high) {
  if (!(high > low) || !(tolerance > 0)) throw std::logic_error("Bisection: needs low < high and tolerance > 0");
}

double Bisection::midpoint() const {
  const double m = lo_ + (hi_ - lo_) / 2;
  return integer_ ? std::floor(m) : m;
}

std::vector<double> Bisection::next() const {
  if (done()) return {};
  if (!started_) {
    std::vector<double> v;
    if (!low_known_) v.push_back(low_);
    if (!high_known_) v.push_back(high_);
    return v;
  }
  return {midpoint()};
}

void Bisection::record(double value, bool holds) {
  ++num_probes_;
  if (!started_) {
    if (value == low_ && !low_known_) {
      low_known_ = true;
      low_holds_ = holds;
    } else if (value == high_ && !high_known_) {
      high_known_ = true;
      high_holds_ = holds;
    } else {
      throw std::logic_error("Bisection: recorded a value it did not ask for");
    }
    started_ = low_known_ && high_known_;
    return;
  }
  if (done() || value != midpoint()) throw std::logic_error("Bisection: recorded a value it did not ask for");
  (holds ? lo_ : hi_) = value;
}

bool Bisection::done() const {
  if (!started_) return false;
  if (!low_holds_ || high_holds_) return true;
  return hi_ - lo_ <= tolerance_;
}

std::string Bisection::status() const {
  if (!done()) return "searching";
  if (!low_holds_) return "below_range";
  if (high_holds_) return "above_range";
  return "found";
}

double Bisection::highest_holding() const {
  if (!started_ || !low_holds_) return std::numeric_limits<double>::quiet_NaN();
  return high_holds_ ? high_ : lo_;
}

double Bisection::lowest_failing() const {
  if (!started_ || high_holds_) return std::numeric_limits<double>::quiet_NaN();
  return low_holds_ ? hi_ : low_;
}

}  // namespace testbed
