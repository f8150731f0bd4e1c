// The shipped fleet-scale config (experiments/fleet_1k.ini: 1,024 instances,
// the mix workload on the Azure conversation trace's lengths and gaps) runs
// as shipped but for its size: fewer requests, a smaller cache per instance,
// and the repository's 300-row head of the same trace as the profile (the
// whole trace lives in ../shared, which a fresh clone may not have).
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/cli.h"
#include "support/h5_read.h"

namespace fs = std::filesystem;
using testbed_test::run_cli;

TEST_CASE("fleet_1k.ini runs on 1,024 instances and every request finishes", "[cli][fleet]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_fleet_scale", "fleet_1k");
  const auto o = run_cli("run experiments/fleet_1k.ini --workload.num_requests=5000 --cache.num_blocks=3000"
                         " --workload.profile_trace=traces/samples/azure2023_conv_head300.csv --output " +
                         (dir / "out").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK(o.output.find("warning") == std::string::npos);  // a shipped config sets nothing it does not use
  const auto summary = testbed_test::read_group(dir / "out" / "results.h5", "summary");
  CHECK(summary.at("@num_instances")[0] == 1024);
  CHECK(summary.at("@num_requests")[0] == 5000);
  CHECK(summary.at("@num_finished")[0] == 5000);  // conservation: nothing lost, cancelled or rejected
  // Conversations and shared system prompts reach the cache through prefix_precise.
  CHECK(summary.at("@prefix_hit_rate")[0] > 0.05);
  const auto requests = testbed_test::read_group(dir / "out" / "results.h5", "requests");
  const std::vector<double>& instance = requests.at("instance");
  REQUIRE(instance.size() == 5000);
  const std::set<double> used(instance.begin(), instance.end());
  CHECK(used.size() > 900);  // the router spreads what no cache holds over the whole fleet
  CHECK(*used.rbegin() == 1023);
}

TEST_CASE("a run with workload.read_ahead is bit-identical to one without", "[cli][fleet][read_ahead]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_fleet_scale", "read_ahead");
  const std::string base = "run experiments/fleet_1k.ini --workload.num_requests=3000 --cache.num_blocks=2000"
                           " --fleet.num_instances=256 --workload.profile_trace=traces/samples/azure2023_conv_head300.csv";
  // One thread: the requests come from a producer thread; two: from the fleet's worker while it waits.
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"0", "1"}, {"1", "1"}, {"512", "1"}, {"1", "2"}, {"512", "2"}};
  for (const auto& [ahead, threads] : runs) {
    const auto o = run_cli(base + " --workload.read_ahead=" + ahead + " --fleet.threads=" + threads + " --output " +
                           (dir / (ahead + "_" + threads)).string());
    INFO(o.output);
    REQUIRE(o.status == 0);
  }
  for (const char* group : {"requests", "summary"}) {
    INFO(group);
    const auto one = testbed_test::read_group(dir / "0_1" / "results.h5", group);
    for (size_t k = 1; k < runs.size(); ++k) {
      INFO("read_ahead " << runs[k].first << ", threads " << runs[k].second);
      CHECK(testbed_test::same_bits(
          one, testbed_test::read_group(dir / (runs[k].first + "_" + runs[k].second) / "results.h5", group)));
    }
  }
}

TEST_CASE("a bad trace row read ahead is the same exit-2 error naming file and line", "[cli][read_ahead]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_fleet_scale", "read_ahead_bad");
  std::string trace = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  for (int i = 0; i < 40; ++i) trace += "2023-11-16 18:15:" + std::to_string(10 + i) + ".0000000,100,20\n";
  trace += "2023-11-16 18:15:55.0000000,lots,20\n";
  std::ofstream(dir / "bad.csv") << trace;
  // The last: two threads, so the fleet's worker reads the bad row ahead.
  for (const char* ahead : {"0", "4", "4 --fleet.num_instances=2 --fleet.threads=2"}) {
    const auto o = run_cli("run experiments/sim_speed.ini --workload.kind=trace --trace.format=azure --trace.path=" +
                           (dir / "bad.csv").string() + " --workload.read_ahead=" + ahead + " --overwrite --output " +
                           (dir / "out").string());
    INFO(o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains((dir / "bad.csv").string() + ":42"));
  }
}
