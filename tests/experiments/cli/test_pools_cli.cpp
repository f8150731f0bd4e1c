// Pools from the command line: one unified [pool.NAME] is the plain fleet bit
// for bit; a disaggregated run writes its hand-offs, pools and event log, and
// its resolved config reproduces it; bad pool configs exit 2 naming the key.
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

fs::path scratch(const std::string& name) { return testbed_test::scratch_dir("testbed_pools", name); }

// A simulated micro model (sim executor, linear cost model) on a shared-prefix workload.
fs::path write_config(const fs::path& dir, const std::string& name, const std::string& extra) {
  std::ofstream(dir / "micro.json") << R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512})";
  std::ofstream ini(dir / name);
  ini << "[model]\nconfig = micro.json\n"
         "[executor]\nkind = sim\n"
         "[driver]\nprogress = off\n"
         "[scheduler]\nmax_num_seqs = 8\nmax_batch_tokens = 128\nchunk_size = 64\n"
         "[cache]\nnum_blocks = 64\nblock_size = 8\n"
         "[workload]\nnum_requests = 60\nrate = 40\nsystem_prompt_tokens = 40\nuser_tokens = 10\noutput_tokens = 6\n"
         "num_prefixes = 3\n"
         "[cost_model]\nkind = linear\n"
         "[router]\ntype = prefix_precise\n"
      << extra;
  return dir / name;
}

const char* kDisaggregated =
    "[pool.p]\nrole = prefill\nsize = 2\n"
    "[pool.d]\nrole = decode\nsize = 2\nrouter.type = least_loaded\ncache.num_blocks = 16\nlink.bandwidth_gbps = 0.01\n"
    "[output]\nevents = true\n";

}  // namespace

TEST_CASE("one unified pool is the plain fleet, bit for bit", "[cli][pools][golden]") {
  const fs::path dir = scratch("unified");
  const fs::path plain = write_config(dir, "plain.ini", "[fleet]\nnum_instances = 3\n");
  const fs::path pooled = write_config(dir, "pooled.ini", "[pool.main]\nrole = unified\nsize = 3\n");
  REQUIRE(run_cli("run " + plain.string() + " --output " + (dir / "a").string()).status == 0);
  const Outcome o = run_cli("run " + pooled.string() + " --output " + (dir / "b").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  for (const char* group : {"summary", "requests", "steps", "instances"}) {
    INFO(group);
    CHECK(same_bits(read_group(dir / "a" / "results.h5", group), read_group(dir / "b" / "results.h5", group)));
  }
}

TEST_CASE("a disaggregated run writes hand-offs, pools and events, and its config.ini reproduces it", "[cli][pools]") {
  const fs::path dir = scratch("pd");
  const fs::path ini = write_config(dir, "pd.ini", kDisaggregated);
  const Outcome o = run_cli("run " + ini.string() + " --workload.rate=1000 --output " + (dir / "a").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  const auto requests = read_group(dir / "a" / "results.h5", "requests");
  REQUIRE(requests.at("prefill_instance").size() == 60);
  for (size_t i = 0; i < 60; ++i) {
    CHECK(requests.at("prefill_instance")[i] <= 1);
    CHECK(requests.at("instance")[i] >= 2);
    CHECK(requests.at("transfer_s")[i] > 0);
    CHECK(requests.at("transfer_bytes")[i] > 0);
  }
  const auto summary = read_group(dir / "a" / "results.h5", "summary");
  for (const char* key : {"transfer_mean_s", "handoff_wait_p99_s", "transfer_gb", "pool_p_utilization",
                          "pool_d_utilization", "pool_d_gpu_seconds"})
    CHECK(summary.count(std::string("@") + key) == 1);
  // 16 blocks per decode instance hold two or three sequences: hand-offs wait for room.
  CHECK(summary.at("@handoff_wait_p99_s")[0] > 0);
  // Load per pool, from running sums over the steps: KV in use and sequences per step.
  CHECK(summary.at("@pool_d_kv_usage_mean")[0] > 0);
  CHECK(summary.at("@pool_d_kv_usage_mean")[0] <= 1);
  CHECK(summary.at("@pool_d_batch_size_mean")[0] >= 1);
  const auto pools = read_group(dir / "a" / "results.h5", "pools");
  CHECK(pools.at("size") == std::vector<double>{2, 2});
  CHECK(pools.at("kv_blocks_per_instance") == std::vector<double>{64, 16});
  const auto events = read_group(dir / "a" / "results.h5", "events");
  CHECK(events.at("request").size() == 60 * 8);  // eight named events per handed-off request

  fs::copy_file(dir / "micro.json", dir / "a" / "micro.json");
  const Outcome again = run_cli("run " + (dir / "a" / "config.ini").string() + " --output " + (dir / "b").string());
  INFO(again.output);
  REQUIRE(again.status == 0);
  CHECK(same_bits(requests, read_group(dir / "b" / "results.h5", "requests")));
  // A pool key on the command line overrides the file.
  const Outcome more = run_cli("run " + ini.string() + " --pool.d.size=3 --output " + (dir / "c").string());
  REQUIRE(more.status == 0);
  CHECK(read_group(dir / "c" / "results.h5", "pools").at("size") == std::vector<double>{2, 3});
}

TEST_CASE("bad pool configs exit 2 naming the key and write nothing", "[cli][pools]") {
  const fs::path dir = scratch("errors");
  struct Case {
    std::string extra, args, must_contain;
  };
  const std::vector<Case> cases = {
      {"[pool.a]\nrole = unified\nsize = 1\n[pool.b]\nrole = unified\nsize = 1\n", "", "exactly one pool that takes arrivals"},
      {"[pool.p]\nrole = prefill\nsize = 1\n", "", "pool.p.role"},
      {"[pool.d]\nrole = decode\nsize = 1\n", "", "pool.d.role"},
      {"[pool.x]\nrole = middle\nsize = 1\n", "", "pool.x.role"},
      {"[pool.x]\nrole = unified\n", "", "pool.x.size is required"},
      {"[pool.x]\nsize = 1\n", "", "pool.x.role is required"},
      {"[pool.x]\nrole = unified\nsize = 0\n", "", "pool.x.size"},
      {"[pool.x]\nrole = unified\nsize = 1\nscheduler.max_num_seqs = 0\n", "", "pool.x.scheduler.max_num_seqs"},
      {"[pool.x]\nrole = unified\nsize = 1\nscheduler.bogus = 1\n", "", "pool.x.scheduler.bogus"},
      {"[pool.p]\nrole = prefill\nsize = 1\n[pool.d]\nrole = decode\nsize = 1\ncache.block_size = 16\n", "",
       "pool.d.cache.block_size"},
      {"[pool.x]\nrole = unified\nsize = 2\n[fleet]\nnum_instances = 3\n", "", "fleet.num_instances"},
      {"", "--link.latency_s=-1", "link.latency_s"},
      {"[pool.p]\nrole = prefill\nsize = 1\nlink.layerwise = true\n[pool.d]\nrole = decode\nsize = 1\n", "",
       "pool.p.link.layerwise"},
      {"[pool.x]\nrole = unified\nsize = 1\n", "--pool.y!.size=2", "pool.y!.size"},
      {"[pool.x]\nrole = unified\nsize = 1\n", "--driver.mode=realtime --executor.kind=cpu", "driver.mode"},
      // A decode cache that can never hold a handed-off sequence: simulated and real.
      {"[pool.p]\nrole = prefill\nsize = 1\n[pool.d]\nrole = decode\nsize = 1\ncache.num_blocks = 2\n", "",
       "pool.d.cache.num_blocks"},
      {"[pool.p]\nrole = prefill\nsize = 1\n[pool.d]\nrole = decode\nsize = 1\ncache.num_blocks = 2\n",
       "--driver.mode=realtime --executor.kind=cpu", "pool.d.cache.num_blocks"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const fs::path ini = write_config(dir, "bad" + std::to_string(n++) + ".ini", c.extra);
    const Outcome o =
        run_cli("--timeout-wrapper run " + ini.string() + " " + c.args + " --output " + (dir / "out").string());
    INFO(c.extra << c.args << "\n" << o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains(c.must_contain));
    CHECK_FALSE(fs::exists(dir / "out"));
  }
}

TEST_CASE("two CPU engines, prefill and decode, generate one engine's tokens with the KV really copied", "[cli][pools]") {
  const fs::path dir = scratch("cpu_pd");
  // Offline, real time, and real time with a decode cache of 12 blocks (one or two sequences): hand-offs wait.
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"offline", ""}, {"realtime", ""}, {"realtime", " --pool.d.cache.num_blocks=12"}};
  for (const auto& [mode, decode_args] : variants) {
    INFO(mode << decode_args);
    const std::string cpu = " --executor.kind=cpu --driver.mode=" + mode + " --workload.num_requests=8";
    const fs::path one = write_config(dir, "one.ini", "[output]\ntokens = true\n");
    const fs::path two = write_config(dir, "two.ini",
                                      "[output]\ntokens = true\n"
                                      "[pool.p]\nrole = prefill\nsize = 1\n[pool.d]\nrole = decode\nsize = 1\n");
    const std::string tag = mode + std::to_string(decode_args.size());
    const std::string a = (dir / (tag + "_one")).string(), b = (dir / (tag + "_two")).string();
    REQUIRE(run_cli("run " + one.string() + cpu + " --output " + a).status == 0);
    const Outcome o = run_cli("run " + two.string() + cpu + decode_args + " --output " + b);
    INFO(o.output);
    REQUIRE(o.status == 0);
    CHECK_THAT(o.output, Catch::Contains("hand-offs"));
    const auto tokens_one = read_group(fs::path(a) / "results.h5", "tokens");
    const auto tokens_two = read_group(fs::path(b) / "results.h5", "tokens");
    REQUIRE(tokens_one.at("ids").size() == 8 * 6);
    // Same tokens per request (finish order may differ between the two runs).
    std::map<double, std::vector<double>> by_request_one, by_request_two;
    for (auto* pair : {&tokens_one, &tokens_two}) {
      auto& out = pair == &tokens_one ? by_request_one : by_request_two;
      const auto& ids = pair->at("ids");
      const auto& offsets = pair->at("offsets");
      const auto& req = pair->at("request_id");
      for (size_t k = 0; k < req.size(); ++k)
        out[req[k]] = std::vector<double>(ids.begin() + static_cast<long>(offsets[k]), ids.begin() + static_cast<long>(offsets[k + 1]));
    }
    CHECK(by_request_one == by_request_two);
    // Both engines' steps are recorded, and only steps that ran something.
    const auto steps = read_group(fs::path(b) / "results.h5", "steps");
    bool both = false;
    for (size_t i = 0; i < steps.at("num_seqs").size(); ++i) {
      CHECK(steps.at("num_seqs")[i] >= 1);
      both |= steps.at("instance")[i] == 1;
    }
    CHECK(both);
    const auto requests = read_group(fs::path(b) / "results.h5", "requests");
    for (size_t i = 0; i < requests.at("id").size(); ++i) {
      CHECK(requests.at("prefill_instance")[i] == 0);
      CHECK(requests.at("instance")[i] == 1);
      CHECK(requests.at("transfer_s")[i] > 0);  // the copy, timed
      CHECK(requests.at("transfer_bytes")[i] > 0);
      CHECK(requests.at("transfer_blocks")[i] + requests.at("reused_blocks")[i] > 0);
    }
  }
}

TEST_CASE("a sweep over pool keys runs each point with its pools", "[cli][pools][sweep]") {
  const fs::path dir = scratch("sweep");
  write_config(dir, "pd.ini", kDisaggregated);
  std::ofstream(dir / "sizes.ini") << "[sweep]\nbase = pd.ini\npool.d.size = 1, 3\npool.p.scheduler.chunk_size = 32, 64\n";
  const Outcome o = run_cli("sweep " + (dir / "sizes.ini").string() + " --jobs 1 --output " + (dir / "out").string());
  INFO(o.output);
  REQUIRE(o.status == 0);
  const auto points = read_group(dir / "out" / "sweep.h5", "points");
  REQUIRE(points.at("pool.d.size").size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(points.at("num_finished")[i] == 60);
    CHECK(points.at("transfer_mean_s")[i] > 0);
  }
  // Each point's resolved config names its own pool size; its results agree.
  for (const auto& entry : fs::directory_iterator(dir / "out" / "points")) {
    std::ifstream in(entry.path() / "point.ini");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const bool three = text.find("[pool.d]\nrole = decode\nsize = 3\n") != std::string::npos;
    CHECK((three || text.find("[pool.d]\nrole = decode\nsize = 1\n") != std::string::npos));
    CHECK(read_group(entry.path() / "results.h5", "pools").at("size") == std::vector<double>{2, three ? 3.0 : 1.0});
  }
}
