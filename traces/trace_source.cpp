// trace: replays a recorded trace file (workload.kind = trace, trace.format picks
// the TraceFormat). Lazy: one line is read per request, so a million-row trace
// costs one line of memory (plus one counting pass at start for progress).
// Arrivals are relative to the first request, scaled by trace.time_scale, or
// replaced by a generated process (trace.arrivals) at workload.rate.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "traces/arrivals.h"
#include "traces/random_tokens.h"
#include "traces/trace_format.h"
#include "traces/trace_profile.h"
#include "traces/workload.h"

namespace testbed {

void TraceFormat::fill_prompt(const TraceRow& row, int64_t request_id, std::vector<int32_t>& prompt) const {
  append_span_tokens(prompt, context_.content_seed, static_cast<uint64_t>(request_id), row.input_tokens,
                     context_.vocab_size);
}

namespace {

// trace.* keys: workload.kind = trace replays a recorded trace file.
struct TraceParams : ParamsOf<TraceParams, WorkloadParams> {
  Choice<TraceFormatRegistry> format{"trace.format", "mooncake", "trace file format"};
  std::string path;                // the trace file (required with workload.kind = trace)
  double time_scale = 1.0;         // multiplies the trace's gaps: 0.5 = twice the rate
  int64_t max_requests = 0;        // 0 = every row
  std::string arrivals = "trace";  // trace | poisson | gamma | constant (generated at workload.rate)
  int output_tokens = 0;           // > 0 overrides every row's output length
  // An application's system prompt: the first min(N, input - 1) prompt tokens
  // of every request are one shared sequence (for traces without prefix
  // information, Azure and BurstGPT; lengths stay the trace's).
  int system_prompt_tokens = 0;
  int shared_prefix_tokens() const override { return system_prompt_tokens; }
  // A request that can never run (longer than the model or the KV cache, no
  // output): reject it and go on, as a server answers 400 (the default), make it
  // an error, or truncate the prompt's head to fit the model.
  std::string on_invalid_mode = "reject";
  std::string on_invalid() const override { return on_invalid_mode; }
  void bind(OptionTable& t) override {
    format.bind(t);
    t.add_path("trace.path", &path, "trace file (workload.kind = trace)");
    t.add("trace.time_scale", &time_scale, "multiplies trace gaps (0.5 = twice the rate)");
    t.add("trace.max_requests", &max_requests, "stop after this many requests (0: all)");
    t.add("trace.arrivals", &arrivals, "trace | poisson | gamma | constant (at workload.rate)");
    t.add("trace.output_tokens", &output_tokens, "output length of every request (0: from trace)");
    t.add("trace.on_invalid", &on_invalid_mode, "reject | error | truncate: a request that can never run");
    t.add("trace.system_prompt_tokens", &system_prompt_tokens,
          "leading prompt tokens every request shares (a system prompt; 0: none)");
  }
  void validate() const override {
    format.validate();
    require(time_scale > 0, "trace.time_scale", "must be positive");
    require(max_requests >= 0, "trace.max_requests", "must be >= 0 (0 = all)");
    require(arrivals == "trace" || arrivals == "poisson" || arrivals == "gamma" || arrivals == "constant",
            "trace.arrivals", "unknown arrivals '" + arrivals + "' (known: constant, gamma, poisson, trace)");
    require(output_tokens >= 0, "trace.output_tokens", "must be >= 0 (0 = from the trace)");
    require(on_invalid_mode == "reject" || on_invalid_mode == "error" || on_invalid_mode == "truncate", "trace.on_invalid",
            "must be reject, error or truncate, got '" + on_invalid_mode + "'");
    require(system_prompt_tokens >= 0 && system_prompt_tokens <= (1 << 24), "trace.system_prompt_tokens",
            "must be in [0, 2^24]");
  }
  void validate_selected() const override {
    require(!path.empty(), "trace.path", "workload.kind = trace needs a trace file");
  }
};

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
  // lengths_only: requests carry their lengths and arrivals but no prompt
  // tokens (read_trace_profile: a generator draws from the trace's
  // distributions); path_key names the key that gave the file in errors.
  TraceSource(const TraceParams& p, const WorkloadConfig& c, const WorkloadContext& ctx, bool lengths_only = false,
              std::string path_key = "trace.path")
      : p_(p), c_(c), ctx_(ctx), path_(p.path), path_key_(std::move(path_key)), priorities_(c), lengths_only_(lengths_only) {
    namespace fs = std::filesystem;
    std::error_code ec;  // the non-throwing overload: a path too long to stat is an error here, not a filesystem_error
    require(fs::is_regular_file(path_, ec), path_key_, "cannot open trace file '" + path_ + "'");
    TraceFormatContext fc;
    fc.content_seed = mix_seed(c.seed, 0x7472616365ULL);  // "trace"
    fc.vocab_size = ctx.vocab_size;
    format_ = p.format.create(fc);
    if (p.arrivals != "trace")
      arrivals_ = std::make_unique<ArrivalProcess>(p.arrivals, c.rate, c.burstiness, mix_seed(c.seed, 1),
                                                   "trace.arrivals");
    Rng prefix_rng(mix_seed(c.seed, 0x737973ULL));  // "sys"
    append_random_tokens(system_prompt_, prefix_rng, p.system_prompt_tokens, ctx.vocab_size);
    const int64_t num_lines = count_nonblank_lines();
    in_.open(path_);
    require(static_cast<bool>(in_), path_key_, "cannot open trace file '" + path_ + "'");
    read_header();
    const int64_t num_rows = num_lines - (has_header_ ? 1 : 0);
    if (num_rows <= 0) throw ConfigError(path_ + ": no requests in the trace (trace.path)");
    // A format that skips rows knows no request count in advance (-1).
    if (format_->is_one_request_per_row())
      size_hint_ = p.max_requests > 0 ? std::min(num_rows, p.max_requests) : num_rows;
  }

  std::optional<Request> next() override {
    if (p_.max_requests > 0 && next_id_ >= p_.max_requests) return std::nullopt;
    std::string line;
    for (;;) {
      if (pending_) {
        line = std::move(*pending_);
        pending_.reset();
      } else {
        if (!read_line(in_, line)) {
          // A trace that gives nothing would run an empty experiment and report success.
          if (next_id_ == 0)
            throw ConfigError(path_ + ": no requests: trace.format = " + p_.format.name + " skipped all " +
                              std::to_string(rows_skipped_) + " rows (rows it documents as failed requests)");
          return std::nullopt;
        }
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
      ++rows_skipped_;
    }
  }

  int64_t size_hint() const override { return size_hint_; }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(path_ + ":" + std::to_string(line_no_) + ": " + what);
  }

  int64_t count_nonblank_lines() const {
    std::ifstream in(path_);
    require(static_cast<bool>(in), path_key_, "cannot open trace file '" + path_ + "'");
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
    const bool keep_output = p_.output_tokens == 0;
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
    r.arrival_s = arrivals_ ? arrivals_->next() : (row.timestamp_s - first_timestamp_s_) * p_.time_scale;
    if (!std::isfinite(r.arrival_s))
      fail("timestamp " + std::to_string(row.timestamp_s) + " s is too far from the first row's " +
           std::to_string(first_timestamp_s_) + " s (the arrival time is not finite)");
    r.max_output_tokens = keep_output ? static_cast<int>(row.output_tokens) : p_.output_tokens;
    if (lengths_only_) {
      r.prompt.resize(static_cast<size_t>(row.input_tokens));  // zeros: only the length is read
      return r;
    }
    // Room for the output too: the engine appends generated tokens to the prompt.
    r.prompt.reserve(static_cast<size_t>(row.input_tokens) + static_cast<size_t>(r.max_output_tokens));
    format_->fill_prompt(row, r.id, r.prompt);
    const size_t shared = std::min(system_prompt_.size(), r.prompt.size() - 1);  // one token of its own at least
    std::copy(system_prompt_.begin(), system_prompt_.begin() + static_cast<std::ptrdiff_t>(shared), r.prompt.begin());
    r.sampling = ctx_.sampling;
    const int drawn = priorities_.next();  // drawn for every row, so a recorded priority shifts no other row's
    r.priority = row.priority >= 0 ? row.priority : drawn;
    return r;
  }

  TraceParams p_;
  WorkloadConfig c_;
  WorkloadContext ctx_;
  std::string path_;
  std::string path_key_;
  std::unique_ptr<TraceFormat> format_;
  std::vector<int32_t> system_prompt_;
  std::unique_ptr<ArrivalProcess> arrivals_;
  PriorityDraw priorities_;
  std::ifstream in_;
  std::optional<std::string> pending_;
  bool has_header_ = false;
  int64_t line_no_ = 0;
  int64_t next_id_ = 0;
  int64_t rows_skipped_ = 0;
  int64_t size_hint_ = -1;
  bool lengths_only_ = false;
  double first_timestamp_s_ = 0.0, last_timestamp_s_ = 0.0;
};

TESTBED_REGISTER(WorkloadRegistry, "trace", [](const TraceParams& p, const WorkloadConfig& c, const WorkloadContext& ctx) {
  return std::make_unique<TraceSource>(p, c, ctx);
});

}  // namespace

TraceProfile read_trace_profile(const std::string& path, const std::string& format, const std::string& path_key) {
  TraceParams p;
  p.path = path;
  p.format.name = format;
  p.format.validate();
  WorkloadConfig c;
  TraceSource source(p, c, WorkloadContext{}, /*lengths_only=*/true, path_key);
  TraceProfile out;
  out.path = path;
  double last_s = 0.0;
  while (std::optional<Request> r = source.next()) {
    out.input_tokens.push_back(static_cast<int32_t>(r->prompt.size()));
    out.output_tokens.push_back(r->max_output_tokens);
    if (r->id > 0) out.gaps_s.push_back(r->arrival_s - last_s);
    last_s = r->arrival_s;
  }
  out.span_s = last_s;
  return out;
}

}  // namespace testbed
