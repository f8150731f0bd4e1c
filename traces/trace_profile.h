// A trace's distributions, for generators that draw from a real trace instead
// of replaying it (workload.kind = mix): every row's input and output length,
// and the gaps between consecutive arrivals. Read once, whole, through the same
// reader as workload.kind = trace (so a bad row is an error naming file:line).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace testbed {

struct TraceProfile {
  std::string path;
  std::vector<int32_t> input_tokens;   // one per row, in file order
  std::vector<int32_t> output_tokens;  // same rows
  std::vector<double> gaps_s;          // arrival gaps, rows - 1 of them (>= 0)
  double span_s = 0.0;                 // last arrival - first arrival
  int64_t num_rows() const { return static_cast<int64_t>(input_tokens.size()); }
};

// Reads `path` in trace format `format` (azure, burstgpt, mooncake: trace.format's
// names). ConfigError on an unreadable file (naming `path_key`, the key that
// gave it), an unknown format or a bad row (file:line).
TraceProfile read_trace_profile(const std::string& path, const std::string& format, const std::string& path_key);

}  // namespace testbed
