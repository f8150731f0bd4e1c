// testbed fidelity against the real engine: several real runs of one config
// are the yardstick (their median, range and spread), the simulation's error
// is against the median, and whether it lies in the range is reported; the
// CPU can be pinned; bad flags exit 2 naming them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "support/cli.h"
#include "support/h5_read.h"

namespace fs = std::filesystem;
using testbed_test::Outcome;
using testbed_test::read_group;
using testbed_test::run_cli;

namespace {

fs::path write_config(const fs::path& dir) {
  std::ofstream(dir / "micro.json") << R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512})";
  std::ofstream(dir / "f.ini") << "[model]\nconfig = micro.json\n"
                                  "[executor]\nkind = cpu\n"
                                  "[driver]\nmode = offline\nprogress = off\n"
                                  "[scheduler]\nmax_num_seqs = 4\nmax_batch_tokens = 128\nchunk_size = 64\n"
                                  "[cache]\nnum_blocks = 128\nblock_size = 8\n"
                                  "[workload]\nnum_requests = 12\nrate = 0\nsystem_prompt_tokens = 24\n"
                                  "user_tokens = 8\noutput_tokens = 16\n";
  return dir / "f.ini";
}

}  // namespace

TEST_CASE("fidelity judges the simulation against the spread of repeated real runs", "[cli][fidelity]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_fidelity", "repeats");
  const fs::path ini = write_config(dir);
  const Outcome o = run_cli("fidelity " + ini.string() + " --repeats 3 --profile-repeats 1 --pin-cpu 0 --output " +
                            (dir / "out").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("real run 3 of 3") && Catch::Contains("real range"));
  const auto s = read_group(dir / "out" / "results.h5", "summary");
  const auto sim = read_group(dir / "out" / "results.h5", "sim_summary");
  const auto runs = read_group(dir / "out" / "results.h5", "real_runs");
  CHECK(s.at("@real_runs")[0] == 3);
  for (const std::string m : {"ttft_mean", "tpot_mean", "e2e_mean", "e2e_p99"}) {
    INFO(m);
    const std::vector<double>& v = runs.at(m + "_s");
    REQUIRE(v.size() == 3);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    CHECK(s.at("@real_" + m + "_min")[0] == sorted[0]);
    CHECK(s.at("@real_" + m + "_median")[0] == sorted[1]);
    CHECK(s.at("@real_" + m + "_max")[0] == sorted[2]);
    CHECK(s.at("@real_" + m + "_spread")[0] == Approx((sorted[2] - sorted[0]) / sorted[1]));
    const double simulated = sim.at("@" + m + "_s")[0];
    CHECK(s.at("@err_" + m)[0] == Approx((simulated - sorted[1]) / sorted[1]));
    CHECK(s.at("@in_real_range_" + m)[0] == ((simulated >= sorted[0] && simulated <= sorted[2]) ? 1.0 : 0.0));
  }
  // The stored requests are the median run's (by mean E2E).
  const auto requests = read_group(dir / "out" / "results.h5", "requests");
  CHECK(requests.at("e2e_s").size() == 12);
}

TEST_CASE("fidelity flags out of range exit 2 naming the flag", "[cli][fidelity]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_fidelity", "flags");
  const fs::path ini = write_config(dir);
  for (const auto& [flag, name] : std::vector<std::pair<std::string, std::string>>{
           {"--repeats 0", "--repeats"}, {"--profile-repeats 0", "--profile-repeats"}, {"--pin-cpu 100000", "--pin-cpu"}}) {
    const Outcome o = run_cli("fidelity " + ini.string() + " " + flag + " --output " + (dir / "out").string());
    INFO(flag << "\n" << o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains(name));
  }
  CHECK_FALSE(fs::exists(dir / "out"));
}
