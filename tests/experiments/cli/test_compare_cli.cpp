// testbed compare: two runs' summaries side by side with the config keys they
// differ in; identical configs say so; bad runs and flags exit 2 naming them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "support/cli.h"

namespace fs = std::filesystem;

namespace {

using testbed_test::Outcome;
using testbed_test::run_cli;

fs::path write_config(const fs::path& dir) {
  std::ofstream(dir / "micro.json") << R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512})";
  std::ofstream(dir / "c.ini") << "[model]\nconfig = micro.json\n[executor]\nkind = sim\n[driver]\nprogress = off\n"
                                  "[cache]\nnum_blocks = 64\nblock_size = 8\n[cost_model]\nkind = linear\n"
                                  "[workload]\nnum_requests = 40\nrate = 20\nsystem_prompt_tokens = 40\nuser_tokens = 10\n"
                                  "output_tokens = 6\n";
  return dir / "c.ini";
}

}  // namespace

TEST_CASE("testbed compare prints both runs' metrics and the keys they differ in", "[cli][compare]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_compare", "two");
  const fs::path cfg = write_config(dir);
  REQUIRE(run_cli("run " + cfg.string() + " --output " + (dir / "a").string()).status == 0);
  REQUIRE(run_cli("run " + cfg.string() + " --scheduler.max_num_seqs=2 --output " + (dir / "b").string()).status == 0);
  const Outcome o = run_cli("compare " + (dir / "a").string() + " " + (dir / "b" / "results.h5").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK(o.output.find("| num_finished | 40 | 40 |") != std::string::npos);
  CHECK(o.output.find("| ttft_p99_s |") != std::string::npos);
  CHECK(o.output.find("| scheduler.max_num_seqs | 256 | 2 |") != std::string::npos);
  CHECK(o.output.find("| workload.rate |") == std::string::npos);  // equal keys are not listed
  const Outcome same = run_cli("compare " + (dir / "a").string() + " " + (dir / "a").string() + " --all");
  CHECK(same.status == 0);
  CHECK(same.output.find("no config key differs") != std::string::npos);
  CHECK(same.output.find("| kv_waste_mean |") != std::string::npos);  // --all: every summary key
  const Outcome one = run_cli("compare " + (dir / "a").string());
  CHECK(one.status == 2);
  CHECK(one.output.find("at least two runs") != std::string::npos);
  const Outcome missing = run_cli("compare " + (dir / "a").string() + " " + (dir / "none").string());
  CHECK(missing.status == 2);
  CHECK(missing.output.find((dir / "none").string()) != std::string::npos);
  const Outcome flag = run_cli("compare " + (dir / "a").string() + " " + (dir / "b").string() + " --each");
  CHECK(flag.status == 2);
  CHECK(flag.output.find("--each") != std::string::npos);
}
