// testbed export-trace: the requests a config's workload produces, as BLIS's
// trace CSV, are the ones a run of that config serves (same arrivals, prompt
// lengths and output lengths, same shared prefixes); bad flags exit 2.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/cli.h"
#include "support/h5_read.h"

namespace fs = std::filesystem;
using testbed_test::Outcome;
using testbed_test::run_cli;

namespace {

struct Row {
  double arrival_s = 0;
  std::string id;
  std::vector<long> prompt, decode;
};

std::vector<long> parse_list(const std::string& quoted) {
  REQUIRE(quoted.size() >= 4);
  REQUIRE(quoted.front() == '"');
  std::vector<long> out;
  std::stringstream s(quoted.substr(2, quoted.size() - 4));
  for (std::string item; std::getline(s, item, ',');) out.push_back(std::stol(item));
  return out;
}

std::vector<Row> read_export(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  CHECK(line == "arrival_time,request_id,model,prefill_tokens,decode_tokens");
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    // arrival,id,model,"[...]","[...]": the lists are the quoted fields.
    const size_t q1 = line.find('"'), q2 = line.find('"', q1 + 1), q3 = line.find('"', q2 + 1), q4 = line.find('"', q3 + 1);
    REQUIRE(q4 != std::string::npos);
    std::stringstream head(line.substr(0, q1));
    Row r;
    std::string arrival;
    std::getline(head, arrival, ',');
    std::getline(head, r.id, ',');
    r.arrival_s = std::stod(arrival);
    r.prompt = parse_list(line.substr(q1, q2 - q1 + 1));
    r.decode = parse_list(line.substr(q3, q4 - q3 + 1));
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

TEST_CASE("export-trace writes the requests a run of the same config serves", "[cli][export]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_export", "same");
  const std::string config = "experiments/sim_speed.ini --workload.num_requests=30 --workload.system_prompt_tokens=64 "
                             "--workload.user_tokens=24 --workload.output_tokens=5 --driver.progress=off";
  const Outcome e = run_cli("export-trace " + config + " --output " + (dir / "t.csv").string());
  INFO(e.output);
  REQUIRE(e.status == 0);
  CHECK_THAT(e.output, Catch::Contains("exported 30 requests (2640 prompt, 150 output tokens)"));
  const std::vector<Row> rows = read_export(dir / "t.csv");
  REQUIRE(rows.size() == 30);
  REQUIRE(run_cli("run " + config + " --output " + (dir / "run").string()).status == 0);
  const auto req = testbed_test::read_group(dir / "run" / "results.h5", "requests");
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO("request " << i);
    CHECK(rows[i].id == "request_" + std::to_string(i));
    CHECK(rows[i].arrival_s == Approx(req.at("arrival_s")[i]).margin(1e-9));
    CHECK(static_cast<double>(rows[i].prompt.size()) == req.at("prompt_tokens")[i]);
    CHECK(static_cast<double>(rows[i].decode.size()) == req.at("output_tokens")[i]);
    // The shared system prompt is the same tokens in every request: the other simulator sees the sharing.
    CHECK(std::equal(rows[i].prompt.begin(), rows[i].prompt.begin() + 64, rows[0].prompt.begin()));
    if (i) CHECK_FALSE(std::equal(rows[i].prompt.begin() + 64, rows[i].prompt.end(), rows[0].prompt.begin() + 64));
  }
}

TEST_CASE("export-trace replays a trace file and refuses what BLIS cannot hold", "[cli][export]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_export", "trace");
  const std::string trace = "experiments/sim_speed.ini --workload.kind=trace --trace.format=mooncake "
                            "--trace.path=traces/samples/mooncake_conversation_head300.jsonl --trace.max_requests=12";
  const Outcome e = run_cli("export-trace " + trace + " --output " + (dir / "t.csv").string());
  INFO(e.output);
  REQUIRE(e.status == 0);
  const std::vector<Row> rows = read_export(dir / "t.csv");
  REQUIRE(rows.size() == 12);
  for (size_t i = 1; i < rows.size(); ++i) CHECK(rows[i].arrival_s >= rows[i - 1].arrival_s);
  // Mooncake's first two requests share hash block 0: their first 512 tokens are the same.
  CHECK(std::equal(rows[1].prompt.begin(), rows[1].prompt.begin() + 512, rows[0].prompt.begin()));
  const Outcome missing = run_cli("export-trace " + trace);
  CHECK(missing.status == 2);
  CHECK_THAT(missing.output, Catch::Contains("--output"));
  const Outcome cancel = run_cli("export-trace " + trace + " --workload.cancel_fraction=0.5 --output " +
                                 (dir / "c.csv").string());
  CHECK(cancel.status == 2);
  CHECK_THAT(cancel.output, Catch::Contains("workload.cancel_fraction"));
  CHECK_FALSE(fs::exists(dir / "c.csv"));
}
