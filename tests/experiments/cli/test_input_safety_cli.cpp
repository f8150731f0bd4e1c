// No silent surprises at the command line: a key the run will not use warns
// and is recorded; settings that contradict each other say what to change; the
// default output directory is the resolved config's own; results record where
// they came from.
#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/metrics/results_file.h"
#include "support/cli.h"

namespace fs = std::filesystem;
using testbed_test::Outcome;
using testbed_test::run_cli;

namespace {

fs::path scratch(const std::string& name) { return testbed_test::scratch_dir("testbed_input_safety", name); }

// The simulator on a linear cost model, a shared-prefix workload: a run of milliseconds.
fs::path write_config(const fs::path& dir) {
  std::ofstream(dir / "micro.json") << R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512})";
  std::ofstream(dir / "exp.ini") << "[model]\nconfig = micro.json\n"
                                    "[executor]\nkind = sim\n[driver]\nprogress = off\n"
                                    "[scheduler]\nmax_num_seqs = 8\nmax_batch_tokens = 128\nchunk_size = 32\n"
                                    "[cache]\nnum_blocks = 64\nblock_size = 8\n"
                                    "[workload]\nnum_requests = 12\nrate = 20\nsystem_prompt_tokens = 40\n"
                                    "user_tokens = 10\noutput_tokens = 6\n[cost_model]\nkind = linear\n";
  return dir / "exp.ini";
}

std::map<std::string, testbed::ResultsAttr> run_attrs(const fs::path& h5) {
  std::map<std::string, testbed::ResultsAttr> out;
  for (const testbed::ResultsAttr& a : testbed::read_results_attrs(h5.string(), "run")) out[a.name] = a;
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("keys the run will not use warn once each and are recorded in /run", "[cli][warnings]") {
  const fs::path dir = scratch("unused");
  const fs::path ini = write_config(dir);
  const Outcome o = run_cli("run " + ini.string() + " --router.weight_kv=3 --trace.path=t.jsonl --workload.burstiness=0.5"
                            " --scheduler.chunk_size=256 --output " + (dir / "out").string());
  INFO(o.output);
  REQUIRE(o.status == 0);  // warnings, not errors: the run is still what the config says
  const char* expected[] = {
      "router.weight_kv: not used: router.type is round_robin (it applies to router.type = weighted)",
      "trace.path: not used: workload.kind is shared_prefix (it applies to workload.kind = trace)",
      "workload.burstiness: not used: it shapes gamma arrivals, and workload.arrival is poisson",
      "scheduler.chunk_size: 256 is larger than scheduler.max_batch_tokens (128)"};
  for (const char* w : expected) {
    INFO(w);
    CHECK(count(o.output, std::string("testbed: warning: ") + w) == 1);
  }
  auto run = run_attrs(dir / "out" / "results.h5");
  REQUIRE(run.count("warnings"));
  CHECK(run["num_warnings"].number == 4);
  for (const char* w : expected) CHECK_THAT(run["warnings"].text, Catch::Contains(w));

  // A config without them warns about nothing, and says so in the file.
  const Outcome clean = run_cli("run " + ini.string() + " --output " + (dir / "clean").string());
  REQUIRE(clean.status == 0);
  CHECK(clean.output.find("warning") == std::string::npos);
  run = run_attrs(dir / "clean" / "results.h5");
  CHECK(run["num_warnings"].number == 0);
  CHECK(run["warnings"].text.empty());
}

TEST_CASE("mix names the keys its profile and shares leave unused", "[cli][warnings]") {
  const fs::path dir = scratch("mix_unused");
  const fs::path ini = write_config(dir);  // it sets workload.output_tokens = 6
  const std::string profile = (dir / "profile.csv").string();
  std::ofstream(profile) << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,37,4\n"
                            "2023-11-16 18:15:50.9951690,39,10\n";
  const Outcome o = run_cli("run " + ini.string() + " --workload.kind=mix --workload.profile_trace=" + profile +
                            " --workload.share_chat=0 --workload.turns=7 --cache.num_blocks=4096"
                            " --output " + (dir / "out").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK(count(o.output, "testbed: warning: workload.output_tokens: not used: the rows of workload.profile_trace give "
                        "the output lengths") == 1);
  CHECK(count(o.output, "testbed: warning: workload.turns: not used: workload.share_chat is 0 (no conversations)") == 1);
  const Outcome plain = run_cli("run " + ini.string() + " --workload.kind=mix --workload.profile_format=burstgpt"
                                " --output " + (dir / "plain").string());
  INFO(plain.output);
  REQUIRE(plain.status == 0);
  CHECK(count(plain.output, "testbed: warning: workload.profile_format: not used: workload.profile_trace is not set") == 1);
  CHECK(plain.output.find("workload.output_tokens: not used") == std::string::npos);
}

TEST_CASE("a resolved config.ini reruns without warnings", "[cli][warnings]") {
  // It states every key, the candidates not chosen included: at their defaults they are no surprise.
  const fs::path dir = scratch("resolved");
  const fs::path ini = write_config(dir);
  REQUIRE(run_cli("run " + ini.string() + " --output " + (dir / "first").string()).status == 0);
  const Outcome again = run_cli("run " + (dir / "first" / "config.ini").string() + " --output " + (dir / "again").string());
  INFO(again.output);
  REQUIRE(again.status == 0);
  CHECK(again.output.find("warning") == std::string::npos);
}

TEST_CASE("the default output directory is the resolved config's own", "[cli][output]") {
  const fs::path dir = scratch("default_dir");
  const fs::path ini = write_config(dir);
  const auto results_dirs = [&] {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir / "results")) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  REQUIRE(run_cli("run exp.ini", dir.string()).status == 0);
  REQUIRE(run_cli("run exp.ini --router.type=least_loaded", dir.string()).status == 0);
  std::vector<std::string> dirs = results_dirs();
  REQUIRE(dirs.size() == 2);  // an override is another config: another directory, nothing overwritten
  for (const std::string& d : dirs) {
    CHECK_THAT(d, Catch::StartsWith("exp-"));
    CHECK(d.size() == 4 + 8);
    CHECK(fs::exists(dir / "results" / d / "results.h5"));
  }
  // The same config again lands in the same place (same config, same seed: the same results).
  REQUIRE(run_cli("run exp.ini", dir.string()).status == 0);
  CHECK(results_dirs() == dirs);
  const Outcome o = run_cli("run exp.ini --router.type=least_loaded", dir.string());
  CHECK_THAT(o.output, Catch::Contains("results/exp-"));  // where it went is printed
  CHECK(results_dirs() == dirs);
}

TEST_CASE("a directory that holds something else is not written into without --overwrite", "[cli][output]") {
  const fs::path dir = scratch("foreign");
  const fs::path ini = write_config(dir);
  fs::create_directories(dir / "notes");
  std::ofstream(dir / "notes" / "todo.txt") << "mine\n";
  const Outcome o = run_cli("run " + ini.string() + " --output " + (dir / "notes").string());
  CHECK(o.status == 2);
  CHECK_THAT(o.output, Catch::Contains("holds no run's results") && Catch::Contains("--overwrite"));
  CHECK_FALSE(fs::exists(dir / "notes" / "results.h5"));
  REQUIRE(run_cli("run " + ini.string() + " --output " + (dir / "notes").string() + " --overwrite").status == 0);
  CHECK(fs::exists(dir / "notes" / "results.h5"));
  CHECK(fs::exists(dir / "notes" / "todo.txt"));  // --overwrite replaces the run's files, nothing else
}

TEST_CASE("sizes no machine can hold are errors before the run, not bad_alloc", "[cli][errors]") {
  const fs::path dir = scratch("sizes");
  const fs::path ini = write_config(dir);
  std::ofstream(dir / "giant.json") << R"({"hidden_size": 16384, "intermediate_size": 53248, "num_hidden_layers": 1000,
    "num_attention_heads": 128, "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192})";
  const struct {
    std::string args, key, says;
  } cases[] = {
      // 2.9 TB of block tables: more than any machine this runs on.
      {"--cache.num_blocks=2000000000 --fleet.num_instances=64", "cache.num_blocks", "of host memory for 64 instances"},
      {"--fleet.sample_interval_s=1e-7 --fleet.num_instances=2", "fleet.sample_interval_s", "at least 0.001 s"},
      {"--executor.kind=cpu --driver.mode=offline --model.max_model_len=2000000000", "model.max_model_len",
       "max_position_embeddings (512)"},
      // 3.3 T parameters as fp32 (13 TB): more than any machine this runs on.
      {"--executor.kind=cpu --driver.mode=offline --model.config=" + (dir / "giant.json").string(), "model.config",
       "parameters need"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const Outcome o = run_cli("--timeout-wrapper run " + ini.string() + " " + c.args + " --output " + (dir / "out").string());
    INFO(o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains("testbed: error: " + c.key) && Catch::Contains(c.says));
    CHECK_FALSE(fs::exists(dir / "out"));
  }
}

TEST_CASE("a cache larger than the simulated device warns, and runs as configured", "[cli][warnings]") {
  const fs::path dir = scratch("device_memory");
  const Outcome o = run_cli("run experiments/quickstart.ini --executor.kind=sim --driver.mode=simulated "
                            "--model.config=experiments/models/llama-3.1-8b.json --cost_model.kind=roofline "
                            "--cost_model.hardware=experiments/hardware/h100-sxm.ini --cache.num_blocks=100000 "
                            "--workload.num_requests=4 --driver.progress=off --output " + (dir / "out").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("testbed: warning: cache.num_blocks: 100000 blocks are more than H100") &&
                           Catch::Contains("(28020 after the weights"));
  CHECK_THAT(o.output, Catch::Contains("100000 KV blocks"));  // what the config says is what runs
}

TEST_CASE("a config that is not a regular file is an error, not an empty INI", "[cli][errors]") {
  const fs::path dir = scratch("not_a_file");
  for (const std::string& config : {std::string("/dev/null"), dir.string()}) {
    INFO(config);
    const Outcome o = run_cli("run " + config + " --output " + (dir / "out").string());
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains(config + ": cannot open config file"));
    CHECK_FALSE(fs::exists(dir / "out"));
  }
}

TEST_CASE("every malformed model file and trace fuzzing kept is exit 2 naming the file (and line)", "[cli][errors][fuzz]") {
  const fs::path root = fs::path(TESTBED_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
  const fs::path dir = scratch("regressions");
  const fs::path ini = write_config(dir);
  int checked = 0;
  for (const auto& e : fs::directory_iterator(root / "model_config")) {
    const std::string file = e.path().string();
    const Outcome o = run_cli("--timeout-wrapper run " + ini.string() + " --model.config=" + file + " --output " +
                              (dir / "out").string());
    INFO(o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains("testbed: error: " + file + ": "));
    ++checked;
  }
  for (const char* format : {"mooncake", "azure"}) {
    for (const auto& e : fs::directory_iterator(root / (std::string("trace_") + format))) {
      const std::string file = e.path().string();
      const Outcome o = run_cli("--timeout-wrapper run " + ini.string() + " --workload.kind=trace --trace.format=" +
                                format + " --trace.path=" + file + " --output " + (dir / "out").string());
      INFO(o.output);
      CHECK(o.status == 2);
      CHECK_THAT(o.output, Catch::Contains("testbed: error: " + file + ":") && Catch::Matches("(.|\n)*\\.(jsonl|csv):[0-9]+: (.|\n)*"));
      ++checked;
    }
  }
  CHECK(checked >= 10);
  CHECK_FALSE(fs::exists(dir / "out"));
}
