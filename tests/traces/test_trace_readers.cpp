// Trace readers: Mooncake JSONL, Azure 2023 CSV and BurstGPT CSV on good and
// malformed input (errors name file and line), the trace.* keys, and the
// samples shipped in traces/samples/.
#include <catch2/catch.hpp>

#include "trace_test_util.h"

using namespace testbed;
using namespace testbed::test;

namespace {

const char* kMooncake =
    "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n"
    "{\"timestamp\": 250, \"input_length\": 512, \"output_length\": 7, \"hash_ids\": [0]}\n"
    "\n"
    "{\"hash_ids\": [0, 2, 3], \"output_length\": 1, \"input_length\": 1100, \"timestamp\": 1000}\n";

const char* kAzure =
    "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
    "2023-11-16 23:59:59.5000000,374,44\r\n"
    "2023-11-17 00:00:00.2500000,10,3\r\n"
    "2023-11-17 00:00:02,20,1\r\n";

const char* kBurstGpt =
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "45,ChatGPT,1087,0,1087,Conversation log\n"
    "45.5,GPT-4,417,276,693,API log\n";

// Writes `content` as a trace, reads it all, and returns the error ("" if none).
std::string read_error(const std::string& format, const std::string& content, std::string* path_out = nullptr) {
  ScratchDir dir("bad_" + format);
  const std::string path = dir.write("bad.trace", content);
  if (path_out) *path_out = path;
  return config_error_of([&] { drain(trace_config(format, path)); });
}

}  // namespace

TEST_CASE("trace mooncake reader gives lengths and times from the trace", "[traces]") {
  ScratchDir dir("mooncake_good");
  const auto requests = drain(trace_config("mooncake", dir.write("t.jsonl", kMooncake)));
  REQUIRE(requests.size() == 3);
  CHECK(requests[0].prompt.size() == 600);
  CHECK(requests[1].prompt.size() == 512);
  CHECK(requests[2].prompt.size() == 1100);
  CHECK(requests[0].max_output_tokens == 5);
  CHECK(requests[2].max_output_tokens == 1);
  CHECK(requests[1].arrival_s == Approx(0.25));
  CHECK(requests[2].arrival_s == Approx(1.0));
  for (size_t i = 0; i < requests.size(); ++i) CHECK(requests[i].id == static_cast<int64_t>(i));
}

TEST_CASE("trace mooncake reader rejects malformed lines naming file and line", "[traces]") {
  const std::string good = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}\n";
  std::string path;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]\n", "bad JSON"},
      {"{\"timestamp\": 1, \"input_length\": 10, \"hash_ids\": [0]}\n", "missing field 'output_length'"},
      {"{\"timestamp\": 1, \"input_length\": \"10\", \"output_length\": 5, \"hash_ids\": [0]}\n", "input_length"},
      {"{\"timestamp\": 1, \"input_length\": 10.5, \"output_length\": 5, \"hash_ids\": [0]}\n", "integer"},
      {"{\"timestamp\": \"x\", \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}\n", "timestamp"},
      {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": 0}\n", "hash_ids"},
      {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0, 1]}\n", "needs 1 hash_ids"},
      {"{\"timestamp\": 1, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [0]}\n", "needs 2 hash_ids"},
      {"{\"timestamp\": 1, \"input_length\": 0, \"output_length\": 5, \"hash_ids\": []}\n", "input_length"},
      {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": [0]}\n", "output length 0"},
      {"[1, 2]\n", "expected a JSON object"},
  };
  for (const auto& [line, what] : cases) {
    INFO(line);
    const std::string error = read_error("mooncake", "\n" + good + line, &path);  // blank line 1 still counts
    CHECK_THAT(error, Catch::Contains(path + ":3: "));
    CHECK_THAT(error, Catch::Contains(what));
  }
  const std::string backwards =
      "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}\n" + good;
  CHECK_THAT(read_error("mooncake", backwards, &path), Catch::Contains(path + ":2: timestamp goes backwards"));
}

TEST_CASE("trace azure reader makes arrivals relative to the first row across midnight", "[traces]") {
  ScratchDir dir("azure_good");
  const auto requests = drain(trace_config("azure", dir.write("t.csv", kAzure)));
  REQUIRE(requests.size() == 3);
  CHECK(requests[0].arrival_s == 0.0);
  CHECK(requests[1].arrival_s == Approx(0.75).margin(1e-9));
  CHECK(requests[2].arrival_s == Approx(2.5).margin(1e-9));
  CHECK(requests[0].prompt.size() == 374);
  CHECK(requests[0].max_output_tokens == 44);
  CHECK(requests[1].prompt.size() == 10);
  // No prefix information: different requests share no leading tokens.
  CHECK(requests[0].prompt[0] != requests[1].prompt[0]);
}

TEST_CASE("trace azure reader rejects malformed rows naming file and line", "[traces]") {
  const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n";
  std::string path;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"2023-11-16 18:15:47.1,12x,44\n", "column 'ContextTokens': not an integer"},
      {"2023-11-16 18:15:47.1,12\n", "expected 3 columns, got 2"},
      {"2023-11-16 18:15:47.1,12,4,5\n", "expected 3 columns, got 4"},
      {"2023/11/16 18:15:47.1,12,4\n", "TIMESTAMP"},
      {"2023-02-30 18:15:47,12,4\n", "not a valid date"},
      {"2023-11-16 18:15:40,12,4\n", "timestamp goes backwards"},
      {"2023-11-16 18:15:47.1,,4\n", "ContextTokens"},
  };
  for (const auto& [line, what] : cases) {
    INFO(line);
    const std::string error = read_error("azure", header + line, &path);
    CHECK_THAT(error, Catch::Contains(path + ":3: "));
    CHECK_THAT(error, Catch::Contains(what));
  }
  CHECK_THAT(read_error("azure", "TIMESTAMP,Context,GeneratedTokens\n", &path),
             Catch::Contains(path + ":1: header has no column 'ContextTokens'"));
  // A JSONL trace read as CSV says what it looks like.
  CHECK_THAT(read_error("azure", "{\"timestamp\": 0, \"input_length\": 10}\n", &path),
             Catch::Contains(path + ":1: this line is JSON") && Catch::Contains("trace.format = mooncake"));
}

TEST_CASE("trace burstgpt reader skips failed requests and rejects malformed rows", "[traces]") {
  ScratchDir dir("burstgpt");
  const auto requests = drain(trace_config("burstgpt", dir.write("t.csv", kBurstGpt)));
  REQUIRE(requests.size() == 2);  // the row with 0 response tokens was a failed request
  CHECK(requests[0].arrival_s == 0.0);
  CHECK(requests[1].arrival_s == Approx(40.5));
  CHECK(requests[1].prompt.size() == 417);
  CHECK(requests[1].max_output_tokens == 276);
  CHECK(requests[1].id == 1);

  std::string path;
  const std::string header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
  CHECK_THAT(read_error("burstgpt", header + "5,ChatGPT,47,18,65\n", &path),
             Catch::Contains(path + ":2: expected 6 columns, got 5"));
  CHECK_THAT(read_error("burstgpt", header + "5,ChatGPT,47,18,65,x\nsoon,ChatGPT,1,1,2,x\n", &path),
             Catch::Contains(path + ":3: column 'Timestamp': not a number"));
  CHECK_THAT(read_error("burstgpt", header + "9,ChatGPT,47,18,65,x\n8,ChatGPT,1,1,2,x\n", &path),
             Catch::Contains(path + ":3: timestamp goes backwards"));
  CHECK_THAT(read_error("burstgpt", header + "9,ChatGPT,0,18,18,x\n", &path),
             Catch::Contains(path + ":2: input length 0"));
}

TEST_CASE("a missing trace file names the file and trace.path", "[traces]") {
  const std::string error = config_error_of([] { drain(trace_config("azure", "/no/such/trace.csv")); });
  CHECK_THAT(error, Catch::Contains("trace.path"));
  CHECK_THAT(error, Catch::Contains("/no/such/trace.csv"));
  WorkloadConfig c = trace_config("azure", "");
  CHECK_THAT(config_error_of([&] { c.validate(); }), Catch::Contains("trace.path"));
  c = trace_config("parquet", "x");
  CHECK_THAT(config_error_of([&] { c.validate(); }), Catch::Contains("trace.format"));
}

TEST_CASE("trace keys scale time cap requests override outputs and replace arrivals", "[traces]") {
  ScratchDir dir("trace_keys");
  const std::string path = dir.write("t.jsonl", kMooncake);
  WorkloadConfig c = trace_config("mooncake", path,
                                  {{"trace.time_scale", "0.5"}, {"trace.max_requests", "2"}, {"trace.output_tokens", "9"}});
  auto requests = drain(c);
  REQUIRE(requests.size() == 2);
  CHECK(requests[1].arrival_s == Approx(0.125));
  CHECK(requests[0].max_output_tokens == 9);
  CHECK(requests[1].max_output_tokens == 9);

  c = trace_config("mooncake", path, {{"trace.arrivals", "constant"}});
  c.rate = 4.0;
  requests = drain(c);
  REQUIRE(requests.size() == 3);
  CHECK(requests[1].arrival_s == Approx(0.25));
  CHECK(requests[2].arrival_s == Approx(0.5));
  CHECK(requests[2].prompt.size() == 1100);  // contents and lengths still from the trace
}

TEST_CASE("trace sources know their size and stop when exhausted", "[traces]") {
  ScratchDir dir("size_hint");
  WorkloadContext ctx;
  auto mooncake = make_workload(trace_config("mooncake", dir.write("t.jsonl", kMooncake)), ctx);
  CHECK(mooncake->size_hint() == 3);
  auto azure = make_workload(trace_config("azure", dir.write("t.csv", kAzure)), ctx);
  CHECK(azure->size_hint() == 3);
  auto burstgpt = make_workload(trace_config("burstgpt", dir.write("b.csv", kBurstGpt)), ctx);
  CHECK(burstgpt->size_hint() == -1);  // skipped rows: unknown in advance
  for (int i = 0; i < 3; ++i) CHECK(azure->next().has_value());
  CHECK_FALSE(azure->next().has_value());
  CHECK_FALSE(azure->next().has_value());
}

TEST_CASE("trace replay is deterministic per seed", "[traces]") {
  ScratchDir dir("trace_seed");
  WorkloadConfig c = trace_config("azure", dir.write("t.csv", kAzure));
  const auto a = drain(c), b = drain(c);
  c.seed = 2;
  const auto other = drain(c);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].prompt == b[i].prompt);
  CHECK(a[0].prompt != other[0].prompt);
}

TEST_CASE("the shipped sample traces parse", "[traces]") {
  const auto mooncake = drain(trace_config("mooncake", "traces/samples/mooncake_conversation_head300.jsonl"));
  CHECK(mooncake.size() == 300);
  const auto azure = drain(trace_config("azure", "traces/samples/azure2023_conv_head300.csv"));
  CHECK(azure.size() == 300);
  CHECK(azure.back().arrival_s > 0.0);
  const auto burstgpt = drain(trace_config("burstgpt", "traces/samples/burstgpt_synthetic.csv"));
  CHECK(burstgpt.size() == 197);  // 200 rows, 3 failed requests skipped
  for (const auto* requests : {&mooncake, &azure, &burstgpt})
    for (size_t i = 1; i < requests->size(); ++i) REQUIRE((*requests)[i].arrival_s >= (*requests)[i - 1].arrival_s);
}

TEST_CASE("a trace row's priority is kept and workload.num_priorities draws the missing ones", "[traces]") {
  ScratchDir dir("trace_priority");
  const std::string path = dir.write(
      "p.jsonl", "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [0], \"priority\": 4}\n"
                 "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1]}\n");
  auto requests = drain(trace_config("mooncake", path));
  REQUIRE(requests.size() == 2);
  CHECK(requests[0].priority == 4);
  CHECK(requests[1].priority == 0);
  WorkloadConfig c = trace_config("mooncake", path);
  c.num_priorities = 1000;
  requests = drain(c);
  CHECK(requests[0].priority == 4);  // the trace's own value wins
  CHECK(requests[1].priority > 0);   // drawn (0 has probability 1/1000 for this seed)
  CHECK(requests[1].priority < 1000);
  CHECK_THAT(read_error("mooncake",
                        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [0], "
                        "\"priority\": -1}\n"),
             Catch::Contains("priority"));
}

TEST_CASE("trace.system_prompt_tokens gives every prompt one shared head and keeps the trace's lengths", "[traces]") {
  const std::string path = "traces/samples/azure2023_conv_head300.csv";
  const auto plain = drain(trace_config("azure", path));
  const auto shared = drain(trace_config("azure", path, {{"trace.system_prompt_tokens", "500"}}));
  REQUIRE(plain.size() == shared.size());
  const auto longest = std::max_element(shared.begin(), shared.end(),
                                        [](const Request& a, const Request& b) { return a.prompt.size() < b.prompt.size(); });
  REQUIRE(longest->prompt.size() > 500);
  const std::vector<int32_t> head(longest->prompt.begin(), longest->prompt.begin() + 500);
  int short_prompts = 0;
  for (size_t i = 0; i < shared.size(); ++i) {
    const auto& p = shared[i].prompt;
    REQUIRE(p.size() == plain[i].prompt.size());
    CHECK(shared[i].arrival_s == plain[i].arrival_s);
    const size_t k = std::min<size_t>(500, p.size() - 1);
    CHECK(std::equal(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(k), head.begin()));
    // The rest is the request's own.
    CHECK(std::equal(p.begin() + static_cast<std::ptrdiff_t>(k), p.end(), plain[i].prompt.begin() + static_cast<std::ptrdiff_t>(k)));
    short_prompts += p.size() <= 500;
  }
  CHECK(short_prompts > 0);  // such prompts share all but their last token
  CHECK_THAT(config_error_of([&] { trace_config("azure", path, {{"trace.system_prompt_tokens", "-1"}}).validate(); }),
             Catch::Contains("trace.system_prompt_tokens"));
}
