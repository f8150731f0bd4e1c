// Speculative decoding from the command line: a real CPU run with the n-gram
// proposer records each request's acceptance, and a simulation of the same
// workload replaying it (spec.acceptance = trace:FILE) reproduces the tokens
// per step within 5%; bad acceptance traces exit 2 naming the key or column;
// a sampled run with a draft model and rejection sampling (spec.verify).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "support/cli.h"
#include "support/h5_read.h"

namespace fs = std::filesystem;

namespace {

using testbed_test::Outcome;
using testbed_test::read_group;
using testbed_test::run_cli;

fs::path write_config(const fs::path& dir) {
  std::ofstream(dir / "micro.json") << R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512})";
  std::ofstream ini(dir / "spec.ini");
  ini << "[model]\nconfig = micro.json\n"
         "[executor]\nkind = cpu\n"
         "[driver]\nmode = offline\nprogress = off\n"
         "[scheduler]\nmax_num_seqs = 4\nmax_batch_tokens = 128\nchunk_size = 64\n"
         "[cache]\nnum_blocks = 256\nblock_size = 8\n"
         "[cost_model]\nkind = linear\n"
         "[workload]\nnum_requests = 8\nrate = 0\nsystem_prompt_tokens = 24\nuser_tokens = 8\noutput_tokens = 96\n"
         "[spec]\nmethod = ngram\nnum_tokens = 4\n";
  return dir / "spec.ini";
}

}  // namespace

TEST_CASE("a simulation replaying a real run's acceptance reproduces its tokens per step", "[cli][spec]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_spec", "trace");
  const fs::path ini = write_config(dir);
  const Outcome real = run_cli("run " + ini.string() + " --output " + (dir / "real").string());
  INFO(real.output);
  REQUIRE(real.status == 0);
  const auto real_summary = read_group(dir / "real" / "results.h5", "summary");
  const auto requests = read_group(dir / "real" / "results.h5", "requests");
  REQUIRE(requests.at("spec_steps").size() == 8);
  const double real_tps = real_summary.at("@spec_tokens_per_step")[0];
  REQUIRE(real_tps > 1.2);  // the proposer helps on this output, so there is something to reproduce

  const std::string trace = (dir / "real" / "results.h5").string();
  const Outcome sim = run_cli("run " + ini.string() + " --executor.kind=sim --driver.mode=simulated " +
                              "--spec.acceptance=trace:" + trace + " --output " + (dir / "sim").string());
  INFO(sim.output);
  REQUIRE(sim.status == 0);
  const auto sim_summary = read_group(dir / "sim" / "results.h5", "summary");
  CHECK(sim_summary.at("@spec_tokens_per_step")[0] == Approx(real_tps).epsilon(0.05));
  CHECK(sim_summary.at("@spec_acceptance_rate")[0] ==
        Approx(real_summary.at("@spec_acceptance_rate")[0]).epsilon(0.08));

  // A trace without the speculation columns, and one that is missing, name what is wrong.
  REQUIRE(run_cli("run " + ini.string() + " --spec.method=none --output " + (dir / "plain").string()).status == 0);
  const Outcome no_columns = run_cli("run " + ini.string() + " --executor.kind=sim --driver.mode=simulated " +
                                     "--spec.acceptance=trace:" + (dir / "plain" / "results.h5").string() +
                                     " --output " + (dir / "bad").string());
  CHECK(no_columns.status == 2);
  CHECK_THAT(no_columns.output, Catch::Contains("spec_drafted"));
  const Outcome missing = run_cli("run " + ini.string() + " --executor.kind=sim --driver.mode=simulated " +
                                  "--spec.acceptance=trace:" + (dir / "nowhere.h5").string() + " --output " +
                                  (dir / "bad").string());
  CHECK(missing.status == 2);
  CHECK_THAT(missing.output, Catch::Contains("spec.acceptance"));
  CHECK_FALSE(fs::exists(dir / "bad"));
}

TEST_CASE("a sampled run verifies a draft model's proposals by rejection sampling", "[cli][spec]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_spec", "rejection");
  const fs::path ini = write_config(dir);
  // The target itself as its draft: under rejection sampling every draft is kept.
  const std::string args = " --spec.method=draft --spec.draft_config=" + (dir / "micro.json").string() +
                           " --model.seed=3 --spec.draft_seed=3 --spec.num_tokens=3 --sampling.temperature=0.8 --output ";
  const Outcome rs = run_cli("run " + ini.string() + args + (dir / "rs").string() + " --spec.verify=rejection");
  INFO(rs.output);
  REQUIRE(rs.status == 0);
  const Outcome match = run_cli("run " + ini.string() + args + (dir / "match").string());
  REQUIRE(match.status == 0);
  const auto rs_summary = read_group(dir / "rs" / "results.h5", "summary");
  const auto match_summary = read_group(dir / "match" / "results.h5", "summary");
  CHECK(rs_summary.at("@spec_acceptance_rate")[0] == 1.0);
  CHECK(rs_summary.at("@spec_tokens_per_step")[0] > 3.0);
  CHECK(match_summary.at("@spec_acceptance_rate")[0] < 1.0);
  std::ifstream resolved(dir / "rs" / "config.ini");
  const std::string text((std::istreambuf_iterator<char>(resolved)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("verify = rejection"));
}
