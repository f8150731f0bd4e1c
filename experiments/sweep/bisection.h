// Bisection for the highest value at which a condition holds, one probe per
// round after the first: the condition is assumed to hold below some threshold
// and fail above it (SLO attainment against request rate). Pure logic: the
// sweep runs each probe as a point and records whether it held.
//
//   Bisection b(1, 64, 0.5);
//   while (!b.done()) for (double v : b.next()) b.record(v, run_and_check(v));
//   b.highest_holding();   // within 0.5 of the threshold, or NaN
#pragma once

#include <string>
#include <vector>

namespace testbed {

class Bisection {
 public:
  // `integer`: probe whole numbers only (midpoints rounded down), stopping at a bracket of 1.
  Bisection(double low, double high, double tolerance, bool integer = false);

  // The values to probe next: {low, high} first, then the bracket's midpoint;
  // empty once done().
  std::vector<double> next() const;
  // The outcome of a probe of next(); a value that was not asked for is a logic_error.
  void record(double value, bool holds);
  bool done() const;
  // found: the threshold is bracketed within the tolerance; below_range: the
  // condition fails already at low; above_range: it still holds at high;
  // searching: not done.
  std::string status() const;
  double highest_holding() const;  // the highest probed value that held (NaN: none)
  double lowest_failing() const;   // the lowest probed value that failed (NaN: none)
  int num_probes() const { return num_probes_; }

 private:
  double low_, high_, tolerance_;
  bool integer_;
  bool started_ = false;  // low and high both recorded
  bool low_known_ = false, high_known_ = false, low_holds_ = false, high_holds_ = false;
  double lo_, hi_;  // the bracket: holds at lo_, fails at hi_
  int num_probes_ = 0;
  double midpoint() const;
};

}  // namespace testbed
