// Minimal CSV for the trace formats: comma-separated, unquoted fields (the Azure
// and BurstGPT releases quote nothing), columns found by header name, numbers
// parsed strictly. Errors are TraceParseError; the reader adds file and line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace testbed {

// Splits on commas; surrounding spaces are trimmed. A quoted field is an error.
std::vector<std::string_view> split_csv(std::string_view line);

// Column of `name` in a header row, or a TraceParseError listing what is there.
size_t csv_column(const std::vector<std::string_view>& header, std::string_view name);

// The whole field must be the number; `column` names it in the error.
int64_t parse_int_field(std::string_view field, std::string_view column);
double parse_double_field(std::string_view field, std::string_view column);

// "YYYY-MM-DD HH:MM:SS[.fraction]" (UTC, up to 9 fraction digits) as nanoseconds
// since 1970-01-01, the Azure LLM inference trace's TIMESTAMP. Years 1678-2261
// only: what int64_t nanoseconds hold.
int64_t parse_datetime_ns(std::string_view field, std::string_view column);

}  // namespace testbed
