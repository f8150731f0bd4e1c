// trace.format = burstgpt: the BurstGPT trace (github.com/HPMLL/BurstGPT, Azure
// OpenAI GPT service logs; Wang et al., "BurstGPT", 2024):
//   Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
//   5,ChatGPT,472,18,490,Conversation log
// Timestamp is in seconds from the trace start. Columns are found by header name.
// Rows with 0 response tokens are skipped: the release documents them as failed
// requests (BurstGPT_N.csv "with some failure that Response tokens are 0"s,
// BurstGPT_without_fails_N.csv without them), and a request that generates
// nothing cannot be served as "generate exactly M tokens". Skipping them makes
// both files replay as the served traffic. Any other bad row is an error.
// Like Azure, BurstGPT has no prefix information: prompts are random tokens.
#include "traces/csv_fields.h"
#include "traces/trace_format.h"

namespace testbed {
namespace {

class BurstGptFormat : public TraceFormat {
 public:
  explicit BurstGptFormat(const TraceFormatContext& context) : TraceFormat(context) {}

  bool read_header(const std::string& line) override {
    const auto header = split_csv(line);
    num_columns_ = header.size();
    timestamp_ = csv_column(header, "Timestamp");
    request_tokens_ = csv_column(header, "Request tokens");
    response_tokens_ = csv_column(header, "Response tokens");
    return true;
  }

  std::optional<TraceRow> parse_row(const std::string& line) override {
    const auto fields = split_csv(line);
    if (fields.size() != num_columns_)
      throw TraceParseError("expected " + std::to_string(num_columns_) + " columns, got " +
                            std::to_string(fields.size()));
    TraceRow row;
    row.timestamp_s = parse_double_field(fields[timestamp_], "Timestamp");
    row.input_tokens = parse_int_field(fields[request_tokens_], "Request tokens");
    row.output_tokens = parse_int_field(fields[response_tokens_], "Response tokens");
    if (row.output_tokens == 0) return std::nullopt;  // a failed request (see above)
    return row;
  }

  bool is_one_request_per_row() const override { return false; }

 private:
  size_t num_columns_ = 0, timestamp_ = 0, request_tokens_ = 0, response_tokens_ = 0;
};

TESTBED_REGISTER(TraceFormatRegistry, "burstgpt",
                 [](const TraceFormatContext& context) { return std::make_unique<BurstGptFormat>(context); });

}  // namespace
}  // namespace testbed
