// What sits in front of and around the engines, from the command line:
// cancellations, faults, autoscaling, model routing and the semantic cache
// each write their tables and summary keys, keep every request accounted for,
// and reproduce bit for bit; their bad keys exit 2 naming the key.
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
using testbed_test::same_bits;

fs::path scratch(const std::string& name) { return testbed_test::scratch_dir("testbed_around", name); }

void write_model(const fs::path& dir, const std::string& name, int hidden, int vocab = 512) {
  std::ofstream(dir / name) << "{\"hidden_size\": " << hidden << ", \"intermediate_size\": " << 2 * hidden
                            << ", \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                               "\"vocab_size\": "
                            << vocab << ", \"max_position_embeddings\": 512}";
}

// A simulated micro model (sim executor, linear cost model) on `workload` keys.
fs::path write_config(const fs::path& dir, const std::string& name, const std::string& extra,
                      const std::string& workload =
                          "[workload]\nnum_requests = 120\nrate = 40\nsystem_prompt_tokens = 40\nuser_tokens = 10\n"
                          "output_tokens = 12\nnum_prefixes = 3\n") {
  write_model(dir, "micro.json", 64);
  std::ofstream ini(dir / name);
  ini << "[model]\nconfig = micro.json\n"
         "[executor]\nkind = sim\n"
         "[driver]\nprogress = off\n"
         "[scheduler]\nmax_num_seqs = 8\nmax_batch_tokens = 128\nchunk_size = 64\n"
         "[cache]\nnum_blocks = 64\nblock_size = 8\n"
         "[cost_model]\nkind = linear\n"
      << workload << extra;
  return dir / name;
}

double summary(const fs::path& out, const std::string& key) {
  const auto s = read_group(out / "results.h5", "summary");
  const auto it = s.find("@" + key);
  return it == s.end() ? -1e300 : it->second.at(0);
}

Outcome run(const fs::path& config, const fs::path& out, const std::string& flags = "") {
  return run_cli("run " + config.string() + " --output " + out.string() + " " + flags);
}

const char* kSemantic =
    "[workload]\nkind = semantic\nnum_requests = 300\nrate = 40\noutput_tokens = 10\nnum_intents = 40\n"
    "prompt_tokens = 30\nembedding_dim = 16\nexact_repeat = 0.5\nclass_weights = 0.5,0.3,0.2\n";

}  // namespace

TEST_CASE("cancellations are written to /cancelled and every request is accounted for", "[cli][cancel]") {
  const fs::path dir = scratch("cancel");
  const fs::path cfg = write_config(dir, "c.ini", "[fleet]\nnum_instances = 2\n");
  const Outcome o = run(cfg, dir / "a", "--workload.cancel_fraction=0.5 --workload.cancel_mean=0.05");
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK(o.output.find("cancelled") != std::string::npos);
  const auto c = read_group(dir / "a" / "results.h5", "cancelled");
  const double n = static_cast<double>(c.at("id").size());
  CHECK(n > 10);
  CHECK(summary(dir / "a", "num_cancelled") == n);
  CHECK(summary(dir / "a", "num_finished") + n == 120);
  REQUIRE(run(cfg, dir / "b", "--workload.cancel_fraction=0.5 --workload.cancel_mean=0.05").status == 0);
  CHECK(same_bits(c, read_group(dir / "b" / "results.h5", "cancelled")));
  const Outcome bad = run(cfg, dir / "x", "--workload.cancel_after=disconnect");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("workload.cancel_after") != std::string::npos);
}

TEST_CASE("faults from the command line restart or lose requests and bad fault keys exit 2", "[cli][faults]") {
  const fs::path dir = scratch("faults");
  const fs::path cfg = write_config(dir, "f.ini", "[fleet]\nnum_instances = 3\n[router]\ntype = prefix_precise\n"
                                                   "[cost_model]\nprefill_token_s = 1e-3\ndecode_seq_s = 2e-3\n");
  const Outcome o = run(cfg, dir / "a", "--fault.fail=1@1.0 --fault.slow=0@0.5-2x3 --fault.kv_event_delay_s=0.05");
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK(summary(dir / "a", "num_finished") == 120);
  CHECK(summary(dir / "a", "restarts") > 0);
  CHECK(read_group(dir / "a" / "results.h5", "requests").count("restarts") == 1);
  REQUIRE(run(cfg, dir / "l", "--fault.fail=1@1.0 --fault.on_failure=lose").status == 0);
  CHECK(summary(dir / "l", "num_lost") > 0);
  CHECK(summary(dir / "l", "num_lost") + summary(dir / "l", "num_finished") == 120);
  for (const std::string flag : {"--fault.fail=9@1", "--fault.fail=1at1", "--fault.slow=0@2-1x3", "--fault.on_failure=retry"}) {
    const Outcome bad = run(cfg, dir / "x", flag);
    INFO(flag << ": " << bad.output);
    CHECK(bad.status == 2);
    CHECK(bad.output.find(flag.substr(2, flag.find('=') - 2)) != std::string::npos);
  }
  const fs::path pd = write_config(dir, "pd.ini", "[pool.p]\nrole = prefill\nsize = 1\n[pool.d]\nrole = decode\nsize = 2\n");
  const Outcome pool_fault = run(pd, dir / "y", "--fault.fail=0@1");
  CHECK(pool_fault.status == 2);
  CHECK(pool_fault.output.find("unified pools only") != std::string::npos);
}

TEST_CASE("an autoscaled run writes /autoscale and pays for what it held", "[cli][autoscale]") {
  const fs::path dir = scratch("autoscale");
  const fs::path cfg = write_config(dir, "a.ini",
                                    "[fleet]\nnum_instances = 4\n[router]\ntype = least_loaded\n"
                                    "[autoscale]\npolicy = threshold\nsignal = queue_depth\nup_above = 1\ndown_below = 0.1\n"
                                    "interval_s = 0.5\nwindow_s = 1\ncooldown_s = 1\nstart_s = 0.5\nload_gb_s = 100\n"
                                    "[output]\nevents = true\n[cost_model]\nprefill_token_s = 1e-3\ndecode_seq_s = 2e-3\n",
                                    "[workload]\nnum_requests = 400\nrate = 60\nsystem_prompt_tokens = 40\nuser_tokens = 10\n"
                                    "output_tokens = 12\nnum_prefixes = 3\n");
  const Outcome o = run(cfg, dir / "a");
  INFO(o.output);
  REQUIRE(o.status == 0);
  const auto a = read_group(dir / "a" / "results.h5", "autoscale");
  REQUIRE(a.at("t").size() > 3);
  double most = 0;
  for (size_t k = 0; k < a.at("t").size(); ++k) {
    CHECK(a.at("active")[k] + a.at("starting")[k] >= 1);
    CHECK(a.at("active")[k] + a.at("starting")[k] + a.at("draining")[k] <= 4);
    most = std::max(most, a.at("active")[k]);
  }
  CHECK(most > 1);
  CHECK(summary(dir / "a", "replicas_mean") < 4);
  CHECK(summary(dir / "a", "num_finished") == 400);
  for (const std::string flag : {"--autoscale.signal=cpu", "--autoscale.max_replicas=5", "--autoscale.policy=target"}) {
    const Outcome bad = run(cfg, dir / "x", flag);
    INFO(flag << ": " << bad.output);
    CHECK(bad.status == 2);
    CHECK(bad.output.find("autoscale.") != std::string::npos);
  }
}

TEST_CASE("model routing sends classes to pools of their own models", "[cli][model_routing]") {
  const fs::path dir = scratch("model_routing");
  write_model(dir, "large.json", 128);
  const std::string pools =
      "[ingress]\nmodel_router = class\nclass_pools = small, medium, large\nclassifier_accuracy = 0.8\n"
      "quality_failure = 0.5\n"
      "[pool.small]\nrole = unified\nsize = 1\n"
      "[pool.medium]\nrole = unified\nsize = 1\n"
      "[pool.large]\nrole = unified\nsize = 1\nmodel.config = large.json\n";
  const fs::path cfg = write_config(dir, "m.ini", pools, kSemantic);
  const Outcome o = run(cfg, dir / "a");
  INFO(o.output);
  REQUIRE(o.status == 0);
  const auto r = read_group(dir / "a" / "results.h5", "requests");
  REQUIRE(r.count("routed_class") == 1);
  for (size_t k = 0; k < r.at("id").size(); ++k) {
    CHECK(r.at("instance")[k] == r.at("routed_class")[k]);  // one instance per pool, in class order
    if (r.at("quality_failure")[k] > 0) CHECK(r.at("routed_class")[k] < r.at("request_class")[k]);
  }
  CHECK(summary(dir / "a", "quality_failure_rate") > 0);
  write_model(dir, "other_vocab.json", 128, 1024);
  const fs::path bad = write_config(dir, "bad.ini", pools + "[pool.medium]\n", kSemantic);
  const Outcome v = run(bad, dir / "x", "--pool.large.model.config=" + (dir / "other_vocab.json").string());
  CHECK(v.status == 2);
  CHECK(v.output.find("pool.large.model.config") != std::string::npos);
  const Outcome no_class = run(write_config(dir, "nc.ini", pools), dir / "y");
  CHECK(no_class.status == 2);
  CHECK(no_class.output.find("ingress.model_router") != std::string::npos);
}

TEST_CASE("the semantic cache answers repeats at the ingress", "[cli][ingress_cache]") {
  const fs::path dir = scratch("semantic");
  const fs::path cfg = write_config(dir, "s.ini", "[fleet]\nnum_instances = 2\n[ingress]\nsemantic_cache = true\nsemantic_tau = 0.95\n",
                                    kSemantic);
  const Outcome o = run(cfg, dir / "a");
  INFO(o.output);
  REQUIRE(o.status == 0);
  const auto r = read_group(dir / "a" / "results.h5", "requests");
  REQUIRE(r.count("answered_by") == 1);
  CHECK(r.at("id").size() == 300);
  CHECK(summary(dir / "a", "ingress_exact_hit_rate") > 0.1);
  CHECK(summary(dir / "a", "ingress_gpu_seconds_saved") > 0);
  REQUIRE(run(cfg, dir / "b").status == 0);
  CHECK(same_bits(r, read_group(dir / "b" / "results.h5", "requests")));
  const Outcome bad = run(cfg, dir / "x", "--ingress.semantic_tau=1.5");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("ingress.semantic_tau") != std::string::npos);
}

TEST_CASE("the semantic cache in a real CPU run: the model embeds, the lookups are timed", "[cli][ingress_cache]") {
  const fs::path dir = scratch("semantic_real");
  write_model(dir, "micro.json", 64);
  std::ofstream(dir / "r.ini") << "[model]\nconfig = micro.json\n"
                                  "[executor]\nkind = cpu\n"
                                  "[driver]\nmode = offline\nprogress = off\n"
                                  "[scheduler]\nmax_num_seqs = 4\nmax_batch_tokens = 128\n"
                                  "[cache]\nnum_blocks = 96\nblock_size = 8\n"
                                  "[workload]\nkind = semantic\nnum_requests = 60\nrate = 40\noutput_tokens = 4\n"
                                  "num_intents = 12\nprompt_tokens = 20\nembedding_dim = 16\nexact_repeat = 0.6\n";
  const fs::path cfg = dir / "r.ini";
  const Outcome o = run(cfg, dir / "a", "--ingress.semantic_cache=true --ingress.semantic_tau=0.999");
  INFO(o.output);
  REQUIRE(o.status == 0);
  const auto r = read_group(dir / "a" / "results.h5", "requests");
  REQUIRE(r.count("answered_by") == 1);
  REQUIRE(r.count("ingress_s") == 1);
  CHECK(r.at("id").size() == 60);  // every request: the engine's and the cache's answers
  for (double s : r.at("ingress_s")) CHECK(s > 0);
  CHECK(summary(dir / "a", "ingress_exact_hit_rate") > 0);
  CHECK(summary(dir / "a", "ingress_lookup_mean_s") > 0);
  CHECK(summary(dir / "a", "ingress_lookup_p99_s") >= summary(dir / "a", "ingress_lookup_mean_s") * 0.5);
  CHECK(summary(dir / "a", "num_finished") == 60);
  // The simulator's lookup price is no key of a measured run; its resolved config.ini runs again.
  const Outcome priced = run(cfg, dir / "x", "--ingress.semantic_cache=true --ingress.lookup_s=0.01");
  CHECK(priced.status == 2);
  CHECK(priced.output.find("ingress.lookup_s") != std::string::npos);
  REQUIRE(run(dir / "a" / "config.ini", dir / "b").status == 0);
  CHECK(summary(dir / "b", "ingress_exact_hit_rate") > 0);
  // The fleet's mechanisms are simulated: on the wall clock they are errors, not silently ignored.
  for (const std::string flag : {"--fault.fail=0@1 --fault.on_failure=lose", "--fault.slow=0@1-2x2", "--fault.kv_event_delay_s=1",
                                 "--autoscale.policy=threshold --autoscale.up_above=1 --autoscale.down_below=0"}) {
    const Outcome real = run(cfg, dir / "y", flag);
    INFO(flag << ": " << real.output);
    CHECK(real.status == 2);
    CHECK(real.output.find(flag.substr(2, flag.find('=') - 2)) != std::string::npos);
    CHECK(real.output.find("driver.mode = simulated") != std::string::npos);
  }
}

TEST_CASE("a trace request that can never run is rejected and counted, or an error, or truncated", "[cli][on_invalid]") {
  const fs::path dir = scratch("on_invalid");
  // The micro model holds 512 tokens; the second request (1,100 + 6) never fits.
  std::ofstream(dir / "t.jsonl") << "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [0]}\n"
                                    "{\"timestamp\": 10, \"input_length\": 1100, \"output_length\": 6, \"hash_ids\": [0, 1, 2]}\n"
                                    "{\"timestamp\": 20, \"input_length\": 200, \"output_length\": 4, \"hash_ids\": [3]}\n";
  const fs::path cfg = write_config(dir, "o.ini", "",
                                    "[workload]\nkind = trace\n[trace]\nformat = mooncake\npath = t.jsonl\n");
  const Outcome o = run(cfg, dir / "a");
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK(o.output.find("1 rejected") != std::string::npos);
  CHECK(summary(dir / "a", "num_rejected") == 1);
  CHECK(summary(dir / "a", "num_finished") == 2);
  const auto c = read_group(dir / "a" / "results.h5", "cancelled");
  REQUIRE(c.at("id").size() == 1);
  CHECK(c.at("id")[0] == 1);
  CHECK(c.at("reason")[0] == 3);
  const Outcome error = run(cfg, dir / "b", "--trace.on_invalid=error");
  CHECK(error.status == 2);
  CHECK(error.output.find("model.max_model_len: request 1") != std::string::npos);
  REQUIRE(run(cfg, dir / "c", "--trace.on_invalid=truncate").status == 0);
  const auto r = read_group(dir / "c" / "results.h5", "requests");
  REQUIRE(r.at("id").size() == 3);
  CHECK(r.at("prompt_tokens")[1] == 512 - 6);  // the prompt's head cut to fit the model with its output
  const Outcome bad = run(cfg, dir / "x", "--trace.on_invalid=skip");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("trace.on_invalid") != std::string::npos);
}
