// CSV fields for trace readers (see csv_fields.h).
#include "traces/csv_fields.h"

#include <charconv>
#include <cmath>

#include "traces/trace_format.h"

namespace testbed {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_field(std::string_view field, std::string_view column, const char* what) {
  throw TraceParseError("column '" + std::string(column) + "': " + what + " '" + std::string(field) + "'");
}

// Fixed-width decimal digits at s[pos, pos + n).
int digits(std::string_view s, size_t pos, size_t n, std::string_view column) {
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (i >= s.size() || s[i] < '0' || s[i] > '9') bad_field(s, column, "expected YYYY-MM-DD HH:MM:SS[.f], got");
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

constexpr int kMinYear = 1678, kMaxYear = 2261;

bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar.
int64_t days_since_epoch(int64_t y, int m, int d) {
  static const int kCumulative[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
  const auto leaps_through = [](int64_t year) { return year / 4 - year / 100 + year / 400; };
  int64_t days = 365 * (y - 1970) + (leaps_through(y - 1) - leaps_through(1969));
  days += kCumulative[m - 1] + (m > 2 && is_leap(y) ? 1 : 0);
  return days + d - 1;
}

}  // namespace

std::vector<std::string_view> split_csv(std::string_view line) {
  const std::string_view head = trim(line);
  if (!head.empty() && (head.front() == '{' || head.front() == '['))
    throw TraceParseError("this line is JSON, not CSV (a JSONL trace such as Mooncake's is trace.format = mooncake)");
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    const std::string_view field =
        trim(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start));
    if (!field.empty() && field.front() == '"') throw TraceParseError("quoted CSV fields are not supported");
    fields.push_back(field);
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

size_t csv_column(const std::vector<std::string_view>& header, std::string_view name) {
  std::string have;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
    have += (i ? ", " : "") + std::string(header[i]);
  }
  throw TraceParseError("header has no column '" + std::string(name) + "' (columns: " + have + ")");
}

int64_t parse_int_field(std::string_view field, std::string_view column) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size())
    bad_field(field, column, "not an integer:");
  return v;
}

double parse_double_field(std::string_view field, std::string_view column) {
  double v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size() || !std::isfinite(v))
    bad_field(field, column, "not a number:");
  return v;
}

int64_t parse_datetime_ns(std::string_view s, std::string_view column) {
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':')
    bad_field(s, column, "expected YYYY-MM-DD HH:MM:SS[.f], got");
  const int year = digits(s, 0, 4, column), month = digits(s, 5, 2, column), day = digits(s, 8, 2, column);
  // What int64_t nanoseconds since 1970 hold (1677-09-21 to 2262-04-11), in whole years.
  if (year < kMinYear || year > kMaxYear)
    throw TraceParseError("column '" + std::string(column) + "': year " + std::to_string(year) + " is outside " +
                          std::to_string(kMinYear) + "-" + std::to_string(kMaxYear) + " ('" + std::string(s) + "')");
  const int hour = digits(s, 11, 2, column), minute = digits(s, 14, 2, column), second = digits(s, 17, 2, column);
  static const int kDaysIn[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDaysIn[month - 1] || (month == 2 && day == 29 && !is_leap(year)) ||
      hour > 23 || minute > 59 || second > 60)
    bad_field(s, column, "not a valid date and time:");
  int64_t fraction_ns = 0;
  if (s.size() > 19) {
    const size_t num_digits = s.size() - 20;
    if (s[19] != '.' || num_digits < 1 || num_digits > 9) bad_field(s, column, "expected YYYY-MM-DD HH:MM:SS[.f], got");
    fraction_ns = digits(s, 20, num_digits, column);
    for (size_t i = num_digits; i < 9; ++i) fraction_ns *= 10;
  }
  const int64_t seconds = days_since_epoch(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  return seconds * 1000000000 + fraction_ns;
}

}  // namespace testbed
