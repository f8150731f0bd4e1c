// Pearson's chi-square goodness-of-fit test, for tests that check sampled
// tokens against a known distribution.
#pragma once

#include <cmath>
#include <vector>

namespace testbed::test {

// The statistic of `counts` (n draws) against `probs`, cells with expected
// count below 5 pooled into one; *dof gets its degrees of freedom.
inline double chi_square(const std::vector<int>& counts, const float* probs, int n, int* dof) {
  double stat = 0, pooled_obs = 0, pooled_exp = 0;
  int cells = 0;
  for (size_t v = 0; v < counts.size(); ++v) {
    const double e = probs[v] * static_cast<double>(n);
    if (e < 5) {
      pooled_obs += counts[v];
      pooled_exp += e;
      continue;
    }
    stat += (counts[v] - e) * (counts[v] - e) / e;
    ++cells;
  }
  if (pooled_exp >= 5) stat += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp, ++cells;
  *dof = cells - 1;
  return stat;
}

// The 0.999 quantile of chi-square with `dof` degrees of freedom (the critical
// value at significance 0.001): tabulated for dof 1..7, Wilson and
// Hilferty's cube-root approximation above (within 0.5% there).
inline double chi_square_critical_999(int dof) {
  static const double table[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
  if (dof <= 7) return table[dof < 1 ? 1 : dof];
  const double z = 3.0902, a = 2.0 / (9.0 * dof), c = 1.0 - a + z * std::sqrt(a);
  return dof * c * c * c;
}

}  // namespace testbed::test
