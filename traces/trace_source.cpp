// trace: replays a recorded trace file (workload.kind = trace, trace.format picks
// the TraceFormat). Lazy: one line is read per request, so a million-row trace
// costs one line of memory (plus one counting pass at start for progress).
// Arrivals are relative to the first request, scaled by trace.time_scale, or
// replaced by a generated process (trace.arrivals) at workload.rate.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include "engine/config_error.h"
#include "traces/arrivals.h"
#include "traces/random_tokens.h"
#include "traces/trace_format.h"
#include "traces/workload.h"

namespace testbed {

void TraceFormat::fill_prompt(const TraceRow& row, int64_t request_id, std::vector<int32_t>& prompt) const {
  append_span_tokens(prompt, context_.content_seed, static_cast<uint64_t>(request_id), row.input_tokens,
                     context_.vocab_size);
}

namespace {

// Beyond this a length is a corrupt row, not a request (the longest Mooncake
// conversation prompt is 126,195 tokens); it also bounds what one row allocates.
constexpr int64_t kMaxTraceTokens = int64_t{1} << 24;

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t") == std::string::npos; }

// getline that also drops the '\r' of CRLF files (the Azure CSVs are CRLF).
bool read_line(std::istream& in, std::string& line) {
  if (!std::getline(in, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

class TraceSource : public RequestSource {
 public:
  TraceSource(const WorkloadConfig& c, const WorkloadContext& ctx) : c_(c), ctx_(ctx), path_(c.trace.path) {
    namespace fs = std::filesystem;
    require(fs::is_regular_file(path_), "trace.path", "cannot open trace file '" + path_ + "'");
    TraceFormatContext fc;
    fc.content_seed = mix_seed(c.seed, 0x7472616365ULL);  // "trace"
    fc.vocab_size = ctx.vocab_size;
    format_ = TraceFormatRegistry::instance().create("trace.format", c.trace.format, fc);
    if (c.trace.arrivals != "trace")
      arrivals_ = std::make_unique<ArrivalProcess>(c.trace.arrivals, c.rate, c.burstiness, mix_seed(c.seed, 1),
                                                   "trace.arrivals");
    const int64_t num_lines = count_nonblank_lines();
    in_.open(path_);
    require(static_cast<bool>(in_), "trace.path", "cannot open trace file '" + path_ + "'");
    read_header();
    const int64_t num_rows = num_lines - (has_header_ ? 1 : 0);
    if (num_rows <= 0) throw ConfigError(path_ + ": no requests in the trace (trace.path)");
    // A format that skips rows knows no request count in advance (-1).
    if (format_->is_one_request_per_row())
      size_hint_ = c.trace.max_requests > 0 ? std::min(num_rows, c.trace.max_requests) : num_rows;
  }

  std::optional<Request> next() override {
    if (c_.trace.max_requests > 0 && next_id_ >= c_.trace.max_requests) return std::nullopt;
    std::string line;
    for (;;) {
      if (pending_) {
        line = std::move(*pending_);
        pending_.reset();
      } else {
        if (!read_line(in_, line)) return std::nullopt;
        ++line_no_;
        if (is_blank(line)) continue;
      }
      std::optional<TraceRow> row;
      try {
        row = format_->parse_row(line);
      } catch (const TraceParseError& e) {
        fail(e.what());
      }
      if (row) return make_request(*row);
    }
  }

  int64_t size_hint() const override { return size_hint_; }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(path_ + ":" + std::to_string(line_no_) + ": " + what);
  }

  int64_t count_nonblank_lines() const {
    std::ifstream in(path_);
    require(static_cast<bool>(in), "trace.path", "cannot open trace file '" + path_ + "'");
    std::string line;
    int64_t n = 0;
    while (read_line(in, line)) n += is_blank(line) ? 0 : 1;
    return n;
  }

  // The first non-blank line is either the header or the first row (kept pending).
  void read_header() {
    std::string line;
    while (read_line(in_, line)) {
      ++line_no_;
      if (is_blank(line)) continue;
      try {
        has_header_ = format_->read_header(line);
      } catch (const TraceParseError& e) {
        fail(e.what());
      }
      if (!has_header_) pending_ = std::move(line);
      return;
    }
  }

  Request make_request(const TraceRow& row) {
    if (row.input_tokens < 1 || row.input_tokens > kMaxTraceTokens)
      fail("input length " + std::to_string(row.input_tokens) + " is outside [1, 2^24]");
    const bool keep_output = c_.trace.output_tokens == 0;
    if (keep_output && (row.output_tokens < 1 || row.output_tokens > kMaxTraceTokens))
      fail("output length " + std::to_string(row.output_tokens) +
           " is outside [1, 2^24] (trace.output_tokens overrides it)");
    if (next_id_ == 0) first_timestamp_s_ = row.timestamp_s;
    if (next_id_ > 0 && row.timestamp_s < last_timestamp_s_)
      fail("timestamp goes backwards (" + std::to_string(row.timestamp_s) + " s after " +
           std::to_string(last_timestamp_s_) + " s)");
    last_timestamp_s_ = row.timestamp_s;

    Request r;
    r.id = next_id_++;
    r.arrival_s = arrivals_ ? arrivals_->next() : (row.timestamp_s - first_timestamp_s_) * c_.trace.time_scale;
    r.max_output_tokens = keep_output ? static_cast<int>(row.output_tokens) : c_.trace.output_tokens;
    // Room for the output too: the engine appends generated tokens to the prompt.
    r.prompt.reserve(static_cast<size_t>(row.input_tokens) + static_cast<size_t>(r.max_output_tokens));
    format_->fill_prompt(row, r.id, r.prompt);
    r.sampling = ctx_.sampling;
    return r;
  }

  WorkloadConfig c_;
  WorkloadContext ctx_;
  std::string path_;
  std::unique_ptr<TraceFormat> format_;
  std::unique_ptr<ArrivalProcess> arrivals_;
  std::ifstream in_;
  std::optional<std::string> pending_;
  bool has_header_ = false;
  int64_t line_no_ = 0;
  int64_t next_id_ = 0;
  int64_t size_hint_ = -1;
  double first_timestamp_s_ = 0.0, last_timestamp_s_ = 0.0;
};

TESTBED_REGISTER(WorkloadRegistry, "trace", [](const WorkloadConfig& c, const WorkloadContext& ctx) {
  return std::make_unique<TraceSource>(c, ctx);
});

}  // namespace
}  // namespace testbed
