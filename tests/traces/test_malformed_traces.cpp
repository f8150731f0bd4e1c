// Malformed traces: every bad Mooncake, Azure or BurstGPT file is a ConfigError
// naming the file and line (and the field), never a JSON library exception, an
// integer overflow (run under UBSan), an infinite arrival or a silently empty
// replay. Ends with a small deterministic fuzz of each format's rows.
#include <catch2/catch.hpp>
#include <climits>

#include "engine/common/rng.h"
#include "trace_test_util.h"

using namespace testbed;
using namespace testbed::test;

namespace {

std::string read_error(const std::string& format, const std::string& content, std::string* path_out = nullptr,
                       const std::vector<std::pair<std::string, std::string>>& more = {}) {
  ScratchDir dir("malformed_" + format);
  const std::string path = dir.write("bad.trace", content);
  if (path_out) *path_out = path;
  return config_error_of([&] { drain(trace_config(format, path, more)); });
}

std::string mooncake_line(const std::string& timestamp, const std::string& input, const std::string& output,
                          const std::string& ids = "[0]") {
  return "{\"timestamp\": " + timestamp + ", \"input_length\": " + input + ", \"output_length\": " + output +
         ", \"hash_ids\": " + ids + "}\n";
}

const std::string kGoodMooncake = mooncake_line("0", "10", "5");
const std::string kAzureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
const std::string kBurstHeader = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";

}  // namespace

TEST_CASE("mooncake numbers beyond double or int64 or the length limits name file and line", "[traces][malformed]") {
  std::string path;
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Regression: out_of_range.406 escaped the reader (exit 1).
      {mooncake_line("4e777", "10", "5"), "bad JSON"},
      {mooncake_line("1", "1e400", "5"), "bad JSON"},
      // Regression: ceil(INT64_MAX / 512) overflowed (signed) computing the hash id count.
      {mooncake_line("1", "9223372036854775807", "5"), "input_length"},
      {mooncake_line("1", "9223372036854775808", "5"), "input_length"},
      {mooncake_line("1", "18446744073709551615", "5"), "input_length"},
      {mooncake_line("1", "-5", "5"), "input_length"},
      {mooncake_line("1", "10.0", "5"), "input_length"},
      {mooncake_line("1", "16777217", "5"), "input_length"},
      {mooncake_line("1", "10", "9223372036854775807"), "output length 9223372036854775807"},
      {mooncake_line("1", "10", "-1"), "output length -1"},
      {mooncake_line("1", "10", "5.5"), "output_length"},
      {mooncake_line("1", "10", "null"), "output_length"},
      {mooncake_line("1", "10", "5", "[1.5]"), "hash id"},
      {mooncake_line("1", "10", "5", "[-1e400]"), "bad JSON"},
      {mooncake_line("1", "10", "5", "{\"a\": 1}"), "hash_ids"},
      {mooncake_line("null", "10", "5"), "timestamp"},
      {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]} x\n", "bad JSON"},
      {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0], \"priority\": 1e10}\n", "priority"},
      {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0], \"priority\": 9223372036854775808}\n",
       "priority"},
      // Nested arrays are described, not dumped (recursively).
      {mooncake_line("1", std::string(50000, '[') + std::string(50000, ']'), "5"), "input_length' must be an integer, got an array"},
  };
  for (const auto& [line, what] : cases) {
    INFO(line.substr(0, 200));
    const std::string error = read_error("mooncake", kGoodMooncake + line, &path);
    CHECK_THAT(error, Catch::Contains(path + ":2: ") && Catch::Contains(what));
  }
}

TEST_CASE("azure timestamps outside what int64 nanoseconds hold name file and line", "[traces][malformed]") {
  std::string path;
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Regression: years outside 1678-2261 overflowed int64 nanoseconds (UBSan).
      {"1500-01-01 00:00:00,10,5\n", "year 1500 is outside 1678-2261"},
      {"0000-01-01 00:00:00,10,5\n", "year 0 is outside"},
      {"9999-12-31 23:59:59.999999999,10,5\n", "year 9999 is outside"},
      {"2262-04-12 00:00:00,10,5\n", "year 2262 is outside"},
      {"1677-09-21 00:12:44,10,5\n", "year 1677 is outside"},
      {"2023-11-16 18:15:47,nan,5\n", "ContextTokens"},
      {"2023-11-16 18:15:47,10,inf\n", "GeneratedTokens"},
      {"2023-11-16 18:15:47,10,9223372036854775808\n", "GeneratedTokens"},
      {"2023-11-16 18:15:47,10,9223372036854775807\n", "output length 9223372036854775807"},
      {"2023-11-16 18:15:47,-9223372036854775808,5\n", "input length -9223372036854775808"},
      {"2023-11-16 18:15:47.1234567890,10,5\n", "TIMESTAMP"},
      {"2023-11-16 18:15:47.,10,5\n", "TIMESTAMP"},
      {"2023-11-16 18:15:4\n", "expected 3 columns"},
  };
  for (const auto& [line, what] : cases) {
    INFO(line);
    const std::string error = read_error("azure", kAzureHeader + "2023-11-16 18:15:46,374,44\n" + line, &path);
    CHECK_THAT(error, Catch::Contains(path + ":3: ") && Catch::Contains(what));
  }
  // Both ends of the range are valid timestamps, but 583 years apart: not representable as a difference.
  const std::string error = read_error("azure", kAzureHeader + "2261-12-31 23:59:59,10,5\n1678-01-01 00:00:00,10,5\n", &path);
  CHECK_THAT(error, Catch::Contains(path + ":3: ") && Catch::Contains("TIMESTAMP"));
  ScratchDir dir("azure_range");
  const auto requests =
      drain(trace_config("azure", dir.write("t.csv", kAzureHeader + "1678-01-01 00:00:00,10,5\n1970-01-01 00:00:00,10,5\n")));
  REQUIRE(requests.size() == 2);
  CHECK(requests[1].arrival_s == Approx(292.0 * 365.2425 * 86400).epsilon(1e-3));
}

TEST_CASE("burstgpt non-finite or unreachable times name file and line", "[traces][malformed]") {
  std::string path;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"nan,ChatGPT,47,18,65,x\n", "column 'Timestamp': not a number"},
      {"inf,ChatGPT,47,18,65,x\n", "column 'Timestamp': not a number"},
      {"1e400,ChatGPT,47,18,65,x\n", "column 'Timestamp': not a number"},
      {"1e308,ChatGPT,47,18,65,x\n", "not finite"},  // 1e308 - (-1e308) is infinite
      {"9,ChatGPT,nan,18,65,x\n", "Request tokens"},
      {"9,ChatGPT,47,1e3,65,x\n", "Response tokens"},
  };
  for (const auto& [line, what] : cases) {
    INFO(line);
    const std::string error = read_error("burstgpt", kBurstHeader + "-1e308,ChatGPT,47,18,65,x\n" + line, &path);
    CHECK_THAT(error, Catch::Contains(path + ":3: ") && Catch::Contains(what));
  }
}

TEST_CASE("a trace that yields no request is an error naming the file and why", "[traces][malformed]") {
  std::string path;
  // Regression: every row a failed request gave an empty replay and exit 0.
  const std::string failed = kBurstHeader + "5,ChatGPT,472,0,472,Conversation log\n\n6,GPT-4,10,0,10,API log\n";
  std::string error = read_error("burstgpt", failed, &path);
  CHECK_THAT(error, Catch::Contains(path + ": no requests") && Catch::Contains("burstgpt") && Catch::Contains("all 2 rows"));
  // A header and nothing else, blank lines, an empty file.
  for (const auto& [format, content] : std::vector<std::pair<std::string, std::string>>{
           {"burstgpt", kBurstHeader + "\n \n"}, {"azure", kAzureHeader}, {"mooncake", ""}, {"mooncake", "\n\n  \t\n"}}) {
    INFO(format << ": '" << content << "'");
    error = read_error(format, content, &path);
    CHECK_THAT(error, Catch::Contains(path + ": no requests"));
  }
  // One good row after the failed ones is a replay of one request.
  ScratchDir dir("one_left");
  CHECK(drain(trace_config("burstgpt", dir.write("t.csv", failed + "7,GPT-4,10,3,13,API log\n"))).size() == 1);
  // The trace path is a directory, or too long to stat (the throwing std::filesystem call would escape).
  CHECK_THAT(config_error_of([&] { drain(trace_config("azure", "traces")); }),
             Catch::Contains("trace.path") && Catch::Contains("traces"));
  CHECK_THAT(config_error_of([&] { drain(trace_config("azure", "/tmp/" + std::string(5000, 'a'))); }),
             Catch::Contains("trace.path"));
}

TEST_CASE("trace.system_prompt_tokens beyond its bound is an error naming the key and not an overflow", "[traces][malformed]") {
  for (const char* n : {"2147483647", "16777217", "-2147483648"}) {
    INFO(n);
    CHECK_THAT(read_error("mooncake", kGoodMooncake, nullptr, {{"trace.system_prompt_tokens", n}}),
               Catch::Contains("trace.system_prompt_tokens"));
  }
  CHECK_THAT(read_error("mooncake", kGoodMooncake, nullptr, {{"trace.system_prompt_tokens", "2147483648"}}),
             Catch::Contains("trace.system_prompt_tokens"));
  // At the bound a 10-token prompt keeps its length: 9 shared tokens and its own last one.
  ScratchDir dir("system_prompt_bound");
  const auto requests = drain(trace_config("mooncake", dir.write("t.jsonl", kGoodMooncake),
                                           {{"trace.system_prompt_tokens", std::to_string(1 << 24)}}));
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].prompt.size() == 10);
}

TEST_CASE("fuzzed trace rows are read or rejected with a ConfigError naming file and line", "[traces][malformed]") {
  // Deterministic mutations of each format's good rows (byte flips, inserted
  // digits, signs and punctuation, deletions): under ASan/UBSan this also checks
  // that no mutation overflows or reads out of bounds.
  Rng rng(77);
  const char* tokens[] = {"9223372036854775807", "-", "1e400", "nan", "inf", ",", "\"", "[", "]", "{", "}", ".", "0", "9"};
  auto mutate = [&](std::string s) {
    const int edits = 1 + static_cast<int>(rng.below(3));
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t at = rng.below(s.size());
      switch (rng.below(3)) {
        case 0: s[at] = static_cast<char>(1 + rng.below(255)); break;
        case 1: s.insert(at, tokens[rng.below(sizeof tokens / sizeof *tokens)]); break;
        default: s.erase(at, 1 + rng.below(3)); break;
      }
    }
    return s;
  };
  const std::vector<std::pair<std::string, std::pair<std::string, std::string>>> formats = {
      {"mooncake", {"", "{\"timestamp\": 250, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [0, 1]}"}},
      {"azure", {kAzureHeader, "2023-11-17 00:00:00.2500000,10,3"}},
      {"burstgpt", {kBurstHeader, "45.5,GPT-4,417,276,693,API log"}},
  };
  for (const auto& [format, file] : formats) {
    const auto& [header, row] = file;
    int read = 0;
    for (int i = 0; i < 400; ++i) {
      std::string path;
      const std::string line = mutate(row);
      const std::string error = read_error(format, header + row + "\n" + line + "\n" + row + "\n", &path);
      if (error.empty()) {
        ++read;
        continue;
      }
      INFO(format << ": " << line);
      CHECK_THAT(error, Catch::StartsWith(path + ":"));
    }
    INFO(format << ": " << read << " of 400 mutated rows read");
    SUCCEED();
  }
}
