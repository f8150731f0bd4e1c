// Summary metrics of a run, computed from a RunRecorder's records alone.
// TTFT = first token - arrival (the first token comes at the end of the step that
// finishes the prompt, so TTFT includes that step); TPOT = (finish - first token)
// / (output tokens - 1); E2E = TTFT + (N - 1) x TPOT = finish - arrival;
// normalized latency = E2E / output tokens (Orca's and vLLM's evaluation metric).
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "engine/metrics/run_recorder.h"

namespace testbed {

struct SloConfig {
  double ttft_s = 0.0;  // 0: no TTFT target
  double tpot_s = 0.0;  // 0: no TPOT target
  // DistServe's goodput: a rate is served when at least this share of requests
  // meets both targets (summary meets_slo = 1); the highest such rate is the goodput.
  double attainment = 0.9;
  void validate() const;
};

class Summary {
 public:
  void set(const std::string& name, double value);
  double get(const std::string& name) const;  // NaN when absent
  bool has(const std::string& name) const;
  const std::vector<std::pair<std::string, double>>& values() const { return values_; }

 private:
  std::vector<std::pair<std::string, double>> values_;
};

// Linear interpolation between closest ranks (numpy's default); NaN for no values.
double percentile(std::vector<double> values, double p);
// The same for several p at once, ascending (by selection: linear time, the
// values a sort would give, bit for bit).
std::vector<double> percentiles(std::vector<double> values, std::initializer_list<double> ps);

Summary summarize(const RunRecorder& rec, int num_instances, const SloConfig& slo);

// The lines `testbed run` prints.
std::string format_summary(const Summary& s);

}  // namespace testbed
