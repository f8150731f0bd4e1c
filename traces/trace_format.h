// TraceFormat: the per-format half of a trace reader. TraceSource (trace_source.cpp)
// owns the file, line numbers, arrivals and limits; a format only turns one line
// into a TraceRow and a row into prompt tokens. Formats register by name
// (trace.format) in TraceFormatRegistry, one file each.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/common/registry.h"

namespace testbed {

// Thrown by a format for a bad line; TraceSource adds "<file>:<line>: ".
class TraceParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One request as a trace records it.
struct TraceRow {
  double timestamp_s = 0.0;  // in the format's own origin; TraceSource makes it relative
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::vector<int64_t> hash_ids;  // Mooncake only: one id per 512-token block
  int priority = -1;              // the row's priority when the format records one (-1: none)
};

struct TraceFormatContext {
  uint64_t content_seed = 0;  // seeds prompt contents (from workload.seed)
  int vocab_size = 32000;
};

class TraceFormat {
 public:
  virtual ~TraceFormat() = default;
  // Given the first non-blank line: true if it is a header (and consumed).
  virtual bool read_header(const std::string& line) = 0;
  // One data line; nothing for a row the format documents as skipped.
  virtual std::optional<TraceRow> parse_row(const std::string& line) = 0;
  // Prompt token ids of the row that became request `request_id`. The default
  // draws random tokens seeded by (content_seed, request_id): formats without
  // prefix information share nothing.
  virtual void fill_prompt(const TraceRow& row, int64_t request_id, std::vector<int32_t>& prompt) const;
  // False when parse_row may skip rows (then the row count is no request count).
  virtual bool is_one_request_per_row() const { return true; }

 protected:
  explicit TraceFormat(const TraceFormatContext& context) : context_(context) {}
  TraceFormatContext context_;
};

using TraceFormatRegistry = Registry<TraceFormat, const TraceFormatContext&>;

}  // namespace testbed
