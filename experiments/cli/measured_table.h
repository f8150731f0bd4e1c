// Measured serving points (testbed fidelity --measured FILE): a CSV, '#'
// comment lines first, then a header and one row per point:
//
//   point                 a name
//   groups, users_per_group, system_prompt_tokens, prompt_tokens, output_tokens
//                         the shared-prefix workload: groups system prompts x
//                         users_per_group users, each user's whole prompt
//                         (prompt_tokens, the system prompt included) fixed and
//                         replayed, output_tokens each
//   rate, duration_s      arrivals per second, for this long
//   ttft_mean_ms ttft_p99_ms e2e_mean_ms e2e_p99_ms tpot_mean_ms output_tok_s
//                         the measurements; an empty cell is not measured
//
// (experiments/measured/*.csv). Errors name the file, the line and the column.
#pragma once

#include <array>

#include "engine/metrics/summary.h"
#include <string>
#include <vector>

namespace testbed {

struct MeasuredPoint {
  std::string name;
  int groups = 0, users_per_group = 0, system_prompt_tokens = 0, prompt_tokens = 0, output_tokens = 0;
  double rate = 0, duration_s = 0;
  // In the order of kMeasuredMetrics, in seconds (tok/s for output_tok_s); NaN when not measured.
  std::array<double, 6> values{};
  int num_requests() const;
};

struct MeasuredMetric {
  const char* column;   // in the table
  const char* summary;  // the simulated run's /summary key
  double scale;         // table unit -> summary unit
};
constexpr std::array<MeasuredMetric, 6> kMeasuredMetrics{{{"ttft_mean_ms", "ttft_mean_s", 1e-3},
                                                          {"ttft_p99_ms", "ttft_p99_s", 1e-3},
                                                          {"tpot_mean_ms", "tpot_mean_s", 1e-3},
                                                          {"e2e_mean_ms", "e2e_mean_s", 1e-3},
                                                          {"e2e_p99_ms", "e2e_p99_s", 1e-3},
                                                          {"output_tok_s", "throughput_tok_s", 1.0}}};

// Throws ConfigError naming the file (and line, column) when it cannot be read or is malformed.
std::vector<MeasuredPoint> read_measured_table(const std::string& path);

// The --section.key=value overrides that make a run config simulate `p`
// (workload.kind = llmd: groups as customers, the rest of the prompt as each
// user's fixed context, no per-request query).
std::vector<std::string> measured_point_overrides(const MeasuredPoint& p);

// Simulates `p` with the simulator config at `config_path` and the overrides
// `args` (flags --output and --measured are accepted and ignored); writes the
// run to `output_dir` unless it is "". Its /summary.
Summary simulate_measured_point(const std::string& config_path, const std::vector<std::string>& args,
                                const MeasuredPoint& p, const std::string& output_dir);

}  // namespace testbed
