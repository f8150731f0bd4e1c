// trace.format = mooncake: the Mooncake FAST'25 trace release (github.com/kvcache-ai/
// Mooncake, FAST25-release/traces/*.jsonl, Apache-2.0). One JSON object per line:
//   {"timestamp": ms since the trace start, "input_length": N, "output_length": M,
//    "hash_ids": [one id per 512-token block of the prompt]}
// and optionally "priority": an integer, lower is more urgent (scheduler.policy = priority).
// Equal ids mean equal block content, and the ids are prefix-chained (an id is
// only reused when everything before it is equal too). So block k of a prompt
// is 512 tokens derived from (hash id, position in block, trace seed) alone: two
// prompts whose ids agree on a prefix get identical first 512*k tokens, and the
// engine's own 16-token chained block hashes find exactly that sharing. The last
// block is cut to N - 512*(n-1) tokens (a prefix of the full block's tokens).
// Every line of the real conversation trace has ceil(N / 512) ids; a line that
// does not is an error rather than something to guess around.
#include <nlohmann/json.hpp>

#include "traces/random_tokens.h"
#include "traces/trace_format.h"

namespace testbed {
namespace {

constexpr int64_t kMooncakeBlockTokens = 512;  // the block size the trace's hash_ids are for

using nlohmann::json;

// A JSON value for an error message: scalars as written, containers by kind
// (dumping a deeply nested value would recurse without bound).
std::string describe(const json& v) { return v.is_primitive() ? v.dump() : std::string("an ") + v.type_name(); }

int64_t as_int64(const json& v, const std::string& what) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) throw TraceParseError(what + " is too large");
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) throw TraceParseError(what + " must be an integer, got " + describe(v));
  return v.get<int64_t>();
}

const json& field(const json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end()) throw TraceParseError(std::string("missing field '") + key + "'");
  return *it;
}

class MooncakeFormat : public TraceFormat {
 public:
  explicit MooncakeFormat(const TraceFormatContext& context) : TraceFormat(context) {}

  bool read_header(const std::string&) override { return false; }  // JSONL: every line is a row

  std::optional<TraceRow> parse_row(const std::string& line) override {
    json row;
    try {
      row = json::parse(line);
    } catch (const json::exception& e) {  // parse_error, out_of_range.406 for a number beyond double (4e777)
      throw TraceParseError(std::string("bad JSON: ") + e.what());
    }
    if (!row.is_object()) throw TraceParseError("expected a JSON object, got " + std::string(row.type_name()));
    TraceRow out;
    const json& ts = field(row, "timestamp");
    if (!ts.is_number()) throw TraceParseError("field 'timestamp' must be a number (ms), got " + describe(ts));
    out.timestamp_s = ts.get<double>() / 1000.0;
    out.input_tokens = as_int64(field(row, "input_length"), "field 'input_length'");
    out.output_tokens = as_int64(field(row, "output_length"), "field 'output_length'");
    // Optional (not in the published traces): the request's priority, lower is more urgent.
    if (auto it = row.find("priority"); it != row.end()) {
      const int64_t p = as_int64(*it, "field 'priority'");
      if (p < 0 || p > 1000000) throw TraceParseError("field 'priority' must be in [0, 1000000], got " + it->dump());
      out.priority = static_cast<int>(p);
    }
    if (out.input_tokens < 1) throw TraceParseError("field 'input_length' must be >= 1");
    const json& ids = field(row, "hash_ids");
    if (!ids.is_array()) throw TraceParseError("field 'hash_ids' must be an array, got " + describe(ids));
    out.hash_ids.reserve(ids.size());
    for (const json& id : ids) out.hash_ids.push_back(as_int64(id, "a hash id"));
    // ceil(N / 512) without N + 511, which overflows for N near INT64_MAX.
    const int64_t expected =
        out.input_tokens / kMooncakeBlockTokens + (out.input_tokens % kMooncakeBlockTokens != 0 ? 1 : 0);
    if (static_cast<int64_t>(out.hash_ids.size()) != expected)
      throw TraceParseError("input_length " + std::to_string(out.input_tokens) + " needs " + std::to_string(expected) +
                            " hash_ids (one per 512 tokens), got " + std::to_string(out.hash_ids.size()));
    return out;
  }

  void fill_prompt(const TraceRow& row, int64_t, std::vector<int32_t>& prompt) const override {
    for (size_t k = 0; k < row.hash_ids.size(); ++k) {
      const int64_t n =
          std::min(kMooncakeBlockTokens, row.input_tokens - static_cast<int64_t>(k) * kMooncakeBlockTokens);
      append_span_tokens(prompt, context_.content_seed, static_cast<uint64_t>(row.hash_ids[k]), n, context_.vocab_size);
    }
  }
};

TESTBED_REGISTER(TraceFormatRegistry, "mooncake",
                 [](const TraceFormatContext& context) { return std::make_unique<MooncakeFormat>(context); });

}  // namespace
}  // namespace testbed
