// The testbed CLI as a user runs it: errors name the key or file and exit 2
// without writing anything; a good run writes results.h5 and config.ini; the
// same config and seed give identical results.
#include <H5Cpp.h>
#include <sys/wait.h>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/metrics/results_file.h"

#include "engine/model/llama_weights.h"
#include "support/cli.h"
#include "support/h5_read.h"
#include "support/engine_harness.h"

namespace fs = std::filesystem;

namespace {

using testbed_test::Outcome;
using testbed_test::run_cli;
using testbed_test::read_group;
using testbed_test::same_bits;

fs::path scratch(const std::string& name) { return testbed_test::scratch_dir("testbed_cli", name); }

// A small CPU experiment: the micro model, a shared-prefix workload.
fs::path write_config(const fs::path& dir, const std::string& extra = "") {
  std::ofstream(dir / "micro.json") << R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512})";
  std::ofstream ini(dir / "exp.ini");
  ini << "[model]\nconfig = micro.json\n"
         "[executor]\nkind = cpu\ntiming = cost_model\n"
         "[driver]\nmode = simulated\nprogress = off\n"
         "[scheduler]\nmax_num_seqs = 8\nmax_batch_tokens = 128\nchunk_size = 32\n"
         "[cache]\nnum_blocks = 64\nblock_size = 8\n"
         "[workload]\nnum_requests = 12\nrate = 20\nsystem_prompt_tokens = 40\nuser_tokens = 10\noutput_tokens = 6\n"
         "[cost_model]\nkind = linear\n"
      << extra;
  return dir / "exp.ini";
}

}  // namespace

TEST_CASE("testbed --help lists the commands and every key", "[cli]") {
  Outcome o = run_cli("--help");
  CHECK(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("run CONFIG.ini"));
  o = run_cli("run --help");
  CHECK(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("scheduler.max_batch_tokens") && Catch::Contains("cache.prefix_cache"));
  CHECK_THAT(o.output, Catch::Contains("pool.NAME.role") && Catch::Contains("link.bandwidth_gbps") &&
                           Catch::Contains("output.events") && Catch::Contains("slo.attainment"));
  CHECK(run_cli("frobnicate").status == 2);
}

TEST_CASE("config errors name the key or file and exit 2 and write nothing", "[cli]") {
  const fs::path dir = scratch("errors");
  const fs::path ini = write_config(dir);
  const std::string out = " --output " + (dir / "out").string();
  struct Case {
    std::string args, must_contain;
  };
  std::ofstream(dir / "unknown.ini") << "[scheduler]\nbogus_key = 3\n";
  std::ofstream(dir / "unknown_line.ini") << "# a comment\n[scheduler]\nmax_num_seqs = 4\n\nbogus_key = 3\n";
  std::ofstream(dir / "badvalue.ini") << "[scheduler]\nmax_num_seqs = many\n";
  std::ofstream(dir / "zero.ini") << "[scheduler]\nmax_num_seqs = 0\n";
  std::ofstream(dir / "nomodel.ini") << "[model]\nconfig = nowhere/config.json\n[cache]\nnum_blocks = 10\n";
  std::ofstream(dir / "gpt2.json") << R"({"architectures": ["GPT2LMHeadModel"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})";
  const std::vector<Case> cases = {
      {"run " + (dir / "missing.ini").string(), "missing.ini"},
      {"run " + (dir / "unknown.ini").string(), "scheduler.bogus_key"},
      {"run " + (dir / "unknown_line.ini").string(), "unknown_line.ini:5: unknown key 'scheduler.bogus_key'"},
      {"run " + ini.string() + " --executor.kind=sim --cost_model.kind=profiled", "testbed profile"},
      {"run " + ini.string() + " --output.timeline=true --output.steps=false", "output.steps = true"},
      {"run " + ini.string() + " --scheduler.nope=1", "scheduler.nope"},
      {"run " + (dir / "badvalue.ini").string(), "scheduler.max_num_seqs"},
      {"run " + ini.string() + " --cache.block_size=abc", "cache.block_size"},
      {"run " + (dir / "zero.ini").string(), "scheduler.max_num_seqs"},
      {"run " + ini.string() + " --workload.arrival=sometimes", "workload.arrival"},
      {"run " + ini.string() + " --executor.kind=quantum", "executor.kind"},
      {"run " + (dir / "nomodel.ini").string(), "nowhere/config.json"},
      {"run " + ini.string() + " --model.weights=absent.safetensors", "absent.safetensors"},
      {"run " + ini.string() + " --executor.kind=sim --spec.method=ngram", "spec.acceptance"},
      {"run " + ini.string() + " --executor.kind=sim --spec.method=ngram --spec.acceptance=fixed:1.5", "spec.acceptance"},
      {"run " + ini.string() + " --executor.kind=sim --spec.method=ngram --spec.acceptance=trace:x.h5", "spec.acceptance"},
      {"run " + ini.string() + " --spec.method=ngram --spec.acceptance=fixed:0.5", "spec.acceptance"},
      {"run " + ini.string() + " --spec.method=draft", "spec.draft_config"},
      {"run " + ini.string() + " --executor.kind=sim --spec.method=draft --spec.acceptance=fixed:0.5",
       "spec.draft_config"},
      {"run " + ini.string() + " --spec.method=ngram --spec.num_tokens=0", "spec.num_tokens"},
      {"run " + ini.string() + " --spec.verify=rejection", "spec.verify"},
      {"run " + ini.string() + " --model.config=" + (dir / "gpt2.json").string(), "architectures"},
      {"run " + ini.string() + " --model.precision=int3", "model.precision"},
      {"run " + ini.string() + " --model.quantization=gptq", "model.quantization"},
      {"run " + ini.string() + " --model.precision=w4a16 --model.quantization=squeeze", "model.quantization"},
      {"run " + ini.string() + " --executor.kind=sim --model.quant_group_size=64", "model.quant_group_size"},
      // A mixture-of-experts model on a real executor: the executors run dense models only.
      {"run " + ini.string() + " --model.config=experiments/models/mixtral-8x7b.json --executor.timing=measured",
       "mixture-of-experts"},
      {"run " + ini.string() + " --spec.method=ngram --spec.verify=typical", "spec.verify"},
      {"run " + ini.string() + " --executor.kind=sim --spec.method=ngram --spec.acceptance=fixed:0.5 --spec.verify=rejection",
       "spec.verify"},
  };
  for (const Case& c : cases) {
    const Outcome o = run_cli(c.args + out);
    INFO(c.args << "\n" << o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains(c.must_contain));
    CHECK_FALSE(fs::exists(dir / "out"));
  }
}

TEST_CASE("Boost placeholders in values and keys are exit 2, not a hang", "[cli]") {
  // Boost 1.74 formats its errors by substituting placeholders such as %value%
  // and loops forever when the user's text holds one; `timeout` turns a
  // regression into exit 124 instead of a stuck test run.
  const fs::path dir = scratch("placeholders");
  const fs::path ini = write_config(dir);
  std::ofstream(dir / "key.ini") << "[scheduler]\nmax%canonical_option% = 3\n";
  std::ofstream(dir / "gpu.ini") << "[compute]\nbf16_tflops = %value%\n[memory]\ncapacity_gib = 80\nbandwidth_gbps = 3000\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run " + ini.string() + " --scheduler.max_num_seqs=%value%", "scheduler.max_num_seqs"},
      {"run " + ini.string() + " --scheduler.%original_token%=1", "%original_token%"},
      {"run " + (dir / "key.ini").string(), "%canonical_option%"},
      {"run " + ini.string() + " --cost_model.kind=roofline --cost_model.hardware=" + (dir / "gpu.ini").string(),
       "compute.bf16_tflops"},
      {"roofline --model " + (dir / "micro.json").string() + " --hardware experiments/hardware/h100-sxm.ini --tp=%value%",
       "--tp"},
  };
  for (const auto& [args, must_contain] : cases) {
    const Outcome o = run_cli("--timeout-wrapper " + args);
    INFO(args << "\n" << o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains(must_contain));
  }
}

TEST_CASE("a truncated safetensors file is exit 2 naming the file", "[cli]") {
  const fs::path dir = scratch("truncated");
  const fs::path ini = write_config(dir);
  const testbed::ModelConfig cfg = testbed::ModelConfig::from_json_file((dir / "micro.json").string());
  const std::string weights = (dir / "w.safetensors").string();
  testbed::save_safetensors_weights(cfg, testbed::make_dummy_weights(cfg, 1), weights, "BF16");
  Outcome ok = run_cli("run " + ini.string() + " --model.weights=" + weights + " --output " + (dir / "ok").string());
  INFO(ok.output);
  REQUIRE(ok.status == 0);
  fs::resize_file(weights, fs::file_size(weights) / 2);
  const Outcome o = run_cli("run " + ini.string() + " --model.weights=" + weights + " --output " + (dir / "bad").string());
  INFO(o.output);
  CHECK(o.status == 2);
  CHECK_THAT(o.output, Catch::Contains("w.safetensors") && Catch::Contains("truncated"));
  CHECK_FALSE(fs::exists(dir / "bad"));
}

TEST_CASE("a run writes results.h5 and a resolved config.ini that reproduces it", "[cli]") {
  const fs::path dir = scratch("run");
  const fs::path ini = write_config(dir);
  const Outcome o = run_cli("run " + ini.string() + " --output " + (dir / "a").string() + " --scheduler.chunk_size=16");
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("TTFT"));
  REQUIRE(fs::exists(dir / "a" / "results.h5"));
  REQUIRE(fs::exists(dir / "a" / "config.ini"));
  CHECK_FALSE(fs::exists(dir / "a" / "results.h5.tmp"));
  std::ifstream resolved(dir / "a" / "config.ini");
  std::string text((std::istreambuf_iterator<char>(resolved)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("chunk_size = 16"));  // the override is recorded

  const auto summary = read_group(dir / "a" / "results.h5", "summary");
  for (const char* key : {"num_requests", "num_finished", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s",
                          "tpot_p99_s", "e2e_p50_s", "e2e_p99_s", "throughput_tok_s", "prefix_hit_rate", "preemptions"})
    CHECK(summary.count(std::string("@") + key) == 1);
  CHECK(summary.at("@num_finished")[0] == 12);
  CHECK(summary.at("@prefix_hit_rate")[0] > 0.3);
  const auto requests = read_group(dir / "a" / "results.h5", "requests");
  for (const char* col : {"id", "arrival_s", "first_token_s", "finish_s", "prompt_tokens", "cached_tokens",
                          "output_tokens", "preemptions", "instance"})
    CHECK(requests.at(col).size() == 12);
  const auto steps = read_group(dir / "a" / "results.h5", "steps");
  for (const char* col : {"start_s", "duration_s", "num_seqs", "prefill_tokens", "decode_tokens", "kv_blocks_used"})
    CHECK(steps.count(col) == 1);

  // The resolved config alone reproduces the run (its model path is relative to the config's directory).
  fs::copy_file(dir / "micro.json", dir / "a" / "micro.json");
  const Outcome again = run_cli("run " + (dir / "a" / "config.ini").string() + " --output " + (dir / "b").string());
  INFO(again.output);
  REQUIRE(again.status == 0);
  CHECK(same_bits(requests, read_group(dir / "b" / "results.h5", "requests")));
}

TEST_CASE("same config and seed give identical /requests and /summary", "[cli][determinism]") {
  const fs::path dir = scratch("determinism");
  for (const std::string executor : {"cpu", "sim"}) {
    const fs::path ini = write_config(dir, "");
    const std::string common = "run " + ini.string() + " --executor.kind=" + executor +
                               (executor == "sim" ? " --executor.timing=measured" : "");
    REQUIRE(run_cli(common + " --workload.seed=9 --output " + (dir / (executor + "1")).string()).status == 0);
    REQUIRE(run_cli(common + " --workload.seed=9 --output " + (dir / (executor + "2")).string()).status == 0);
    const fs::path a = dir / (executor + "1") / "results.h5", b = dir / (executor + "2") / "results.h5";
    INFO(executor);
    CHECK(same_bits(read_group(a, "requests"), read_group(b, "requests")));
    CHECK(same_bits(read_group(a, "summary"), read_group(b, "summary")));
    CHECK(same_bits(read_group(a, "steps"), read_group(b, "steps")));
    // A different seed changes the results.
    REQUIRE(run_cli(common + " --workload.seed=10 --output " + (dir / (executor + "3")).string()).status == 0);
    CHECK_FALSE(same_bits(read_group(a, "requests"), read_group(dir / (executor + "3") / "results.h5", "requests")));
  }
}

TEST_CASE("output.timeline writes a Chrome trace with one event per step", "[cli]") {
  const fs::path dir = scratch("timeline");
  const fs::path ini = write_config(dir);
  const Outcome o = run_cli("run " + ini.string() + " --output.timeline=true --output " + (dir / "t").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  std::ifstream in(dir / "t" / "timeline.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  const auto steps = read_group(dir / "t" / "results.h5", "steps");
  REQUIRE(trace["traceEvents"].size() == steps.at("start_s").size());
  const auto& first = trace["traceEvents"][0];
  CHECK(first["ph"] == "X");
  CHECK(first["ts"].get<double>() == Approx(steps.at("start_s")[0] * 1e6));
  CHECK(first["dur"].get<double>() == Approx(steps.at("duration_s")[0] * 1e6));
}

TEST_CASE("a rerun without output.timeline removes the earlier run's timeline", "[cli]") {
  const fs::path dir = scratch("stale_timeline");
  const fs::path ini = write_config(dir);
  REQUIRE(run_cli("run " + ini.string() + " --output.timeline=true --output " + (dir / "t").string()).status == 0);
  REQUIRE(fs::exists(dir / "t" / "timeline.json"));
  // Another config's results are not replaced without --overwrite, and stay as they were.
  const Outcome refused = run_cli("run " + ini.string() + " --output " + (dir / "t").string());
  CHECK(refused.status == 2);
  CHECK_THAT(refused.output, Catch::Contains("output.timeline true -> false") && Catch::Contains("--overwrite"));
  CHECK(fs::exists(dir / "t" / "timeline.json"));
  REQUIRE(run_cli("run " + ini.string() + " --output " + (dir / "t").string() + " --overwrite").status == 0);
  CHECK_FALSE(fs::exists(dir / "t" / "timeline.json"));  // it would describe another run's steps
  CHECK(fs::exists(dir / "t" / "results.h5"));
}

TEST_CASE("an output directory that cannot be written is an error before the run, and nothing is written", "[cli]") {
  const fs::path dir = scratch("unwritable");
  const fs::path ini = write_config(dir);
  std::ofstream(dir / "file.txt") << "not a directory\n";
  const Outcome o = run_cli("run " + ini.string() + " --output " + (dir / "file.txt" / "out").string());
  INFO(o.output);
  CHECK(o.status == 2);
  CHECK(o.output.find("--output") != std::string::npos);
  CHECK(o.output.find("is not a directory") != std::string::npos);
  CHECK(o.output.find("requests ") == std::string::npos);  // it never ran
  CHECK(fs::is_regular_file(dir / "file.txt"));
}

TEST_CASE("results record their provenance: commit, version, command line, machine", "[cli]") {
  const fs::path dir = scratch("provenance");
  const fs::path ini = write_config(dir);
  const Outcome o = run_cli("run " + ini.string() + " --scheduler.max_num_seqs=3 --output " + (dir / "out").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  std::map<std::string, testbed::ResultsAttr> run;
  for (const testbed::ResultsAttr& a : testbed::read_results_attrs((dir / "out" / "results.h5").string(), "run"))
    run[a.name] = a;
  for (const char* key : {"commit", "version", "command_line", "host", "cpu"}) {
    INFO(key);
    REQUIRE(run.count(key));
    CHECK(run[key].is_text);
    CHECK_FALSE(run[key].text.empty());
  }
  CHECK(run["commit"].text.size() >= 7);  // a short hash, or "unknown" outside a git checkout
  CHECK(run.count("dirty"));
  CHECK_THAT(run["command_line"].text, Catch::Contains("testbed run ") && Catch::Contains(ini.string()) &&
                                           Catch::Contains("--scheduler.max_num_seqs=3"));
}
