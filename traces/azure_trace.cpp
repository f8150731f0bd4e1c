// trace.format = azure: the Azure LLM inference trace 2023 (github.com/Azure/
// AzurePublicDataset, data/AzureLLMInferenceTrace_{conv,code}.csv, CC-BY-4.0):
//   TIMESTAMP,ContextTokens,GeneratedTokens
//   2023-11-16 18:15:46.6805900,374,44
// Columns are found by header name, so extra columns are fine. Arrivals are
// relative to the first row (computed in integer nanoseconds, then seconds).
// The trace has no prefix information, so prompts are random tokens seeded by
// the request id: requests share nothing. Use it for arrivals and lengths.
#include "traces/csv_fields.h"
#include "traces/trace_format.h"

namespace testbed {
namespace {

class AzureFormat : public TraceFormat {
 public:
  explicit AzureFormat(const TraceFormatContext& context) : TraceFormat(context) {}

  bool read_header(const std::string& line) override {
    const auto header = split_csv(line);
    num_columns_ = header.size();
    timestamp_ = csv_column(header, "TIMESTAMP");
    context_tokens_ = csv_column(header, "ContextTokens");
    generated_tokens_ = csv_column(header, "GeneratedTokens");
    return true;
  }

  std::optional<TraceRow> parse_row(const std::string& line) override {
    const auto fields = split_csv(line);
    if (fields.size() != num_columns_)
      throw TraceParseError("expected " + std::to_string(num_columns_) + " columns, got " +
                            std::to_string(fields.size()));
    const int64_t ns = parse_datetime_ns(fields[timestamp_], "TIMESTAMP");
    if (!has_origin_) {
      origin_ns_ = ns;
      has_origin_ = true;
    }
    int64_t since_origin = 0;  // two valid timestamps can still be more than int64_t nanoseconds apart
    if (__builtin_sub_overflow(ns, origin_ns_, &since_origin))
      throw TraceParseError("column 'TIMESTAMP': '" + std::string(fields[timestamp_]) +
                            "' is more than 292 years from the first row's");
    TraceRow row;
    row.timestamp_s = static_cast<double>(since_origin) * 1e-9;
    row.input_tokens = parse_int_field(fields[context_tokens_], "ContextTokens");
    row.output_tokens = parse_int_field(fields[generated_tokens_], "GeneratedTokens");
    return row;
  }

 private:
  size_t num_columns_ = 0, timestamp_ = 0, context_tokens_ = 0, generated_tokens_ = 0;
  bool has_origin_ = false;
  int64_t origin_ns_ = 0;
};

TESTBED_REGISTER(TraceFormatRegistry, "azure",
                 [](const TraceFormatContext& context) { return std::make_unique<AzureFormat>(context); });

}  // namespace
}  // namespace testbed
