// `testbed sweep` as a user runs it: the merged table equals the points' own
// results, resume skips complete points and reruns broken or stale ones, a
// failing point is reported while the others complete, bad input exits 2
// writing nothing, and a search brackets its threshold.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/metrics/results_file.h"
#include "support/cli.h"

namespace fs = std::filesystem;
using testbed_test::run_cli;

namespace {

fs::path scratch(const std::string& name) { return testbed_test::scratch_dir("testbed_sweep", name); }

// A base config of small simulated runs (micro model, linear cost model) beside `dir`'s sweep files.
void write_base(const fs::path& dir, const std::string& extra = "") {
  std::ofstream(dir / "micro.json") << R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512})";
  std::ofstream(dir / "base.ini") << "[model]\nconfig = micro.json\n[executor]\nkind = sim\n"
                                     "[cost_model]\nkind = linear\n[cache]\nnum_blocks = 256\nblock_size = 8\n"
                                     "[workload]\nnum_requests = 40\nrate = 20\nsystem_prompt_tokens = 40\n"
                                     "user_tokens = 10\noutput_tokens = 6\nseed = 3\n"
                                  << extra;
}

fs::path write_sweep(const fs::path& dir, const std::string& name, const std::string& body) {
  std::ofstream(dir / name) << "[sweep]\nbase = base.ini\n" << body;
  return dir / name;
}

std::string sweep_cmd(const fs::path& file, const fs::path& out, const std::string& more = "") {
  return "sweep " + file.string() + " --output " + out.string() + " --jobs 2 " + more;
}

// A CSV of the sweep table (no quoted fields in these tests): header and rows.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};

Csv read_csv(const fs::path& path) {
  Csv csv;
  std::ifstream in(path);
  std::string line;
  const auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string f; std::getline(ss, f, ',');) out.push_back(f);
    if (!s.empty() && s.back() == ',') out.push_back("");
    return out;
  };
  std::getline(in, line);
  csv.header = split(line);
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < csv.header.size(); ++i) row[csv.header[i]] = i < f.size() ? f[i] : "";
    csv.rows.push_back(row);
  }
  return csv;
}

std::map<std::string, double> summary_of(const fs::path& results) {
  std::map<std::string, double> out;
  for (const testbed::ResultsAttr& a : testbed::read_results_attrs(results.string(), "summary"))
    if (!a.is_text) out[a.name] = a.number;
  return out;
}

double number(const std::string& s) { return s.empty() ? NAN : std::stod(s); }

}  // namespace

TEST_CASE("a sweep runs every point and its merged table equals the points' results", "[cli][sweep]") {
  const fs::path dir = scratch("merge");
  write_base(dir);
  const fs::path file = write_sweep(dir, "grid.ini", "scheduler.policy = fcfs, sjf\nworkload.rate = 10, 40\n");
  const fs::path out = dir / "out";
  const auto o = run_cli(sweep_cmd(file, out));
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("0 done earlier, 4 ran") && Catch::Contains("0 failed"));
  const Csv csv = read_csv(out / "sweep.csv");
  REQUIRE(csv.rows.size() == 4);
  CHECK(csv.header[0] == "id");
  CHECK(csv.header[1] == "status");
  CHECK(csv.header[2] == "scheduler.policy");
  CHECK(csv.header[3] == "workload.rate");
  CHECK(csv.rows[0].at("scheduler.policy") == "fcfs");
  CHECK(csv.rows[1].at("workload.rate") == "40");
  CHECK(csv.rows[2].at("scheduler.policy") == "sjf");
  for (const auto& row : csv.rows) {
    CHECK(row.at("status") == "ok");
    const fs::path pdir = out / "points" / row.at("id");
    const std::map<std::string, double> s = summary_of(pdir / "results.h5");
    REQUIRE(s.size() + 4 == csv.header.size());  // every /summary metric is a column
    for (const auto& [name, value] : s) {
      INFO(name);
      const double merged = number(row.at(name));
      CHECK((merged == value || (std::isnan(merged) && std::isnan(value))));
    }
    // The point is an ordinary run: its resolved config reruns to the same results, bit for bit.
    const fs::path again_dir = dir / "again" / row.at("id");
    const auto again = run_cli("run " + (pdir / "point.ini").string() + " --output " + again_dir.string());
    REQUIRE(again.status == 0);
    CHECK(summary_of(again_dir / "results.h5") == s);
  }
  // Different rates were run, and they differ.
  CHECK(csv.rows[0].at("duration_s") != csv.rows[1].at("duration_s"));
  // sweep.h5 holds the same table: text columns as text, numbers as numbers.
  CHECK(fs::exists(out / "sweep.h5"));
  CHECK(fs::exists(out / "sweep.ini"));
}

TEST_CASE("a sweep resumes: complete points are skipped, broken and stale ones rerun", "[cli][sweep]") {
  const fs::path dir = scratch("resume");
  write_base(dir);
  const fs::path file = write_sweep(dir, "grid.ini", "workload.rate = 10, 20, 40\n");
  const fs::path out = dir / "out";
  REQUIRE(run_cli(sweep_cmd(file, out)).status == 0);
  const Csv first = read_csv(out / "sweep.csv");
  auto o = run_cli(sweep_cmd(file, out));
  CHECK(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("3 done earlier, 0 ran"));
  // A truncated results file and a missing one: those two points run again.
  const fs::path broken = out / "points" / first.rows[0].at("id") / "results.h5";
  fs::resize_file(broken, fs::file_size(broken) / 2);
  fs::remove(out / "points" / first.rows[1].at("id") / "results.h5");
  o = run_cli(sweep_cmd(file, out));
  INFO(o.output);
  CHECK(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("1 done earlier, 2 ran (1 stale rerun)"));
  CHECK(read_csv(out / "sweep.csv").rows == first.rows);  // same results as the first time
  // A changed base config makes every point stale.
  write_base(dir, "[scheduler]\nmax_num_seqs = 2\n");
  o = run_cli(sweep_cmd(file, out));
  CHECK_THAT(o.output, Catch::Contains("0 done earlier, 3 ran (3 stale rerun)"));
  CHECK(read_csv(out / "sweep.csv").rows != first.rows);
}

TEST_CASE("a failing point is reported with its log and the others complete", "[cli][sweep]") {
  const fs::path dir = scratch("failure");
  write_base(dir, "[trace]\nformat = azure\n");
  std::ofstream(dir / "good.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                     "2023-11-16 18:15:46.6805900,37,4\n2023-11-16 18:15:50.9951690,39,9\n";
  std::ofstream(dir / "bad.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,lots,4\n";
  const fs::path file = write_sweep(dir, "traces.ini",
                                    "workload.kind = trace\ntrace.path = " + (dir / "good.csv").string() + ", " +
                                        (dir / "bad.csv").string() + "\n");
  const fs::path out = dir / "out";
  const auto o = run_cli(sweep_cmd(file, out));
  INFO(o.output);
  CHECK(o.status == 1);
  CHECK_THAT(o.output, Catch::Contains("1 failed") && Catch::Contains("log.txt") && Catch::Contains("bad.csv"));
  const Csv csv = read_csv(out / "sweep.csv");
  REQUIRE(csv.rows.size() == 2);
  CHECK(csv.rows[0].at("status") == "ok");
  CHECK(csv.rows[0].at("num_finished") == "2");
  CHECK(csv.rows[1].at("status") == "failed");
  CHECK(csv.rows[1].at("num_finished").empty());
  // Resuming reruns only the failed point.
  CHECK_THAT(run_cli(sweep_cmd(file, out)).output, Catch::Contains("1 done earlier, 1 ran"));
}

TEST_CASE("bad sweep input exits 2 naming it and writes nothing", "[cli][sweep]") {
  const fs::path dir = scratch("errors");
  write_base(dir);
  const fs::path out = dir / "out";
  const fs::path good = write_sweep(dir, "good.ini", "workload.rate = 1, 2\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {sweep_cmd(write_sweep(dir, "unknown.ini", "scheduler.bogus = 1, 2\n"), out), "scheduler.bogus"},
      {sweep_cmd(write_sweep(dir, "value.ini", "workload.rate = 1, fast\n"), out), "workload.rate"},
      {sweep_cmd(write_sweep(dir, "zero.ini", "scheduler.max_num_seqs = 4, 0\n"), out), "zero.ini:3"},
      {sweep_cmd(good, out, "--workload.rate=3"), "overrides a key the sweep file sweeps"},
      {sweep_cmd(good, out, "--cache.nope=3"), "cache.nope"},
      {sweep_cmd(good, out, "--frobnicate"), "unknown option '--frobnicate'"},
      {"sweep " + good.string() + " --output " + out.string() + " --jobs 0", "--jobs"},
      {sweep_cmd(good, out, "--backend nowhere"), "sweep.backend"},
      {sweep_cmd(good, out, "--backend slurm"), "--jobs"},
      {sweep_cmd(write_sweep(dir, "slurmkey.ini", "workload.rate = 1\n[slurm]\nmemory = 4G\n"), out), "slurm.memory"},
      {sweep_cmd(write_sweep(dir, "slurmval.ini", "workload.rate = 1\n[slurm]\nmem = lots\n"), out), "slurm.mem"},
      {sweep_cmd(write_sweep(dir, "metric.ini", "[search]\nkey = workload.rate\nlow = 1\nhigh = 8\nmetric = speed\ntarget = 1\n"),
                 out),
       "unknown metric 'speed'"},
      {sweep_cmd(write_sweep(dir, "bracket.ini",
                             "[search]\nkey = workload.rate\nlow = -1\nhigh = 8\nmetric = slo_attainment\ntarget = 0.9\n"),
                 out),
       "workload.rate"},
      {sweep_cmd(write_sweep(dir, "both.ini",
                             "workload.rate = 1, 2\n[search]\nkey = workload.rate\nlow = 1\nhigh = 8\n"
                             "metric = slo_attainment\ntarget = 0.9\n"),
                 out),
       "both swept and searched"},
      {sweep_cmd(write_sweep(dir, "intkey.ini",
                             "[search]\nkey = scheduler.max_num_seqs\nlow = 1\nhigh = 64\nmetric = slo_attainment\n"
                             "target = 0.9\n"),
                 out),
       "search.integer = true"},
      {sweep_cmd(write_sweep(dir, "notarget.ini", "[search]\nkey = workload.rate\nlow = 1\nhigh = 8\n"
                                                  "metric = slo_attainment\n"),
                 out),
       "search.target: must be given"},
      {sweep_cmd(write_sweep(dir, "targets.ini", "[search]\nkey = workload.rate\nlow = 1\nhigh = 8\n"
                                                 "metric = slo_attainment, ttft_p90_s\ntarget = 0.9\n"),
                 out),
       "1 target(s) for 2 metric(s)"},
      {sweep_cmd(write_sweep(dir, "directions.ini", "[search]\nkey = workload.rate\nlow = 1\nhigh = 8\n"
                                                    "metric = slo_attainment, ttft_p90_s\ntarget = 0.9, 1\n"
                                                    "direction = at_least, at_most, at_most\n"),
                 out),
       "search.direction"},
      {"sweep " + (dir / "missing.ini").string(), "missing.ini"},
  };
  for (const auto& [args, expected] : cases) {
    INFO(args);
    const auto o = run_cli("--timeout-wrapper " + args);
    INFO(o.output);
    CHECK(o.status == 2);
    CHECK_THAT(o.output, Catch::Contains(expected));
    CHECK(!fs::exists(out));
  }
  // --dry-run lists the points and writes nothing.
  const auto o = run_cli(sweep_cmd(good, out, "--dry-run"));
  CHECK(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("2 points") && Catch::Contains("workload.rate=2"));
  CHECK(!fs::exists(out));
}

TEST_CASE("adding a value to a list leaves the other points' results unchanged", "[cli][sweep]") {
  const fs::path dir = scratch("stable");
  write_base(dir);
  const auto small = run_cli(sweep_cmd(write_sweep(dir, "two.ini", "workload.rate = 10, 20\n"), dir / "two"));
  const auto big = run_cli(sweep_cmd(write_sweep(dir, "three.ini", "workload.rate = 10, 15, 20\n"), dir / "three"));
  REQUIRE(small.status == 0);
  REQUIRE(big.status == 0);
  const Csv two = read_csv(dir / "two" / "sweep.csv"), three = read_csv(dir / "three" / "sweep.csv");
  REQUIRE(three.rows.size() == 3);
  CHECK(two.rows[0] == three.rows[0]);
  CHECK(two.rows[1] == three.rows[2]);
  // Derived seeds: the same rate with another seed gives another workload.
  const auto shared = run_cli(sweep_cmd(write_sweep(dir, "shared.ini", "workload.rate = 10\nseeds = shared\n"),
                                        dir / "shared"));
  REQUIRE(shared.status == 0);
  const Csv s = read_csv(dir / "shared" / "sweep.csv");
  CHECK(s.rows[0].at("id") == two.rows[0].at("id"));
  CHECK(s.rows[0].at("duration_s") != two.rows[0].at("duration_s"));
}

TEST_CASE("a rate search brackets the highest rate meeting the condition", "[cli][sweep][search]") {
  const fs::path dir = scratch("search");
  write_base(dir, "[slo]\nttft_s = 0.05\n");
  const fs::path file = write_sweep(dir, "search.ini",
                                    "scheduler.max_num_seqs = 2, 16\nseeds = shared\n"
                                    "[search]\nkey = workload.rate\nlow = 1\nhigh = 2000\n"
                                    "metric = slo_attainment\ntarget = 0.9\ntolerance = 4\n");
  const fs::path out = dir / "out";
  const auto o = run_cli(sweep_cmd(file, out));
  INFO(o.output);
  REQUIRE(o.status == 0);
  const Csv found = read_csv(out / "search.csv"), probes = read_csv(out / "sweep.csv");
  REQUIRE(found.rows.size() == 2);
  std::map<std::string, double> best;
  for (const auto& row : found.rows) {
    INFO(row.at("scheduler.max_num_seqs"));
    REQUIRE(row.at("status") == "found");
    const double lo = number(row.at("workload.rate")), hi = number(row.at("first_failing"));
    CHECK(hi - lo <= 4);
    CHECK(hi > lo);
    best[row.at("scheduler.max_num_seqs")] = lo;
    // Every probe of this grid point agrees with the bracket: holds at or below lo, fails at or above hi.
    int n = 0;
    for (const auto& p : probes.rows) {
      if (p.at("scheduler.max_num_seqs") != row.at("scheduler.max_num_seqs")) continue;
      ++n;
      const double rate = number(p.at("workload.rate")), att = number(p.at("slo_attainment"));
      if (rate <= lo) CHECK(att >= 0.9);
      if (rate >= hi) CHECK(att < 0.9);
    }
    CHECK(n == static_cast<int>(number(row.at("num_probes"))));
  }
  // More sequences per step sustain a higher rate.
  CHECK(best["16"] > best["2"]);
}

TEST_CASE("a search with two conditions holds only where both do", "[cli][sweep][search]") {
  const fs::path dir = scratch("search2");
  write_base(dir);
  const std::string search = "[search]\nkey = workload.rate\nlow = 1\nhigh = 2000\ntolerance = 4\n";
  const fs::path one = write_sweep(dir, "one.ini", "seeds = shared\n" + search + "metric = ttft_p90_s\n"
                                                   "target = 0.05\ndirection = at_most\n");
  const fs::path both = write_sweep(dir, "both.ini", "seeds = shared\n" + search +
                                                     "metric = ttft_p90_s, tpot_p90_s\ntarget = 0.05, 0.004\n"
                                                     "direction = at_most\n");
  REQUIRE(run_cli(sweep_cmd(one, dir / "one")).status == 0);
  const auto o = run_cli(sweep_cmd(both, dir / "both"));
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK_THAT(o.output, Catch::Contains("ttft_p90_s <= 0.05 and tpot_p90_s <= 0.004"));
  const double r1 = number(read_csv(dir / "one" / "search.csv").rows[0].at("workload.rate"));
  const double r2 = number(read_csv(dir / "both" / "search.csv").rows[0].at("workload.rate"));
  CHECK(r2 < r1);  // the second condition binds: it lowers the highest rate
  for (const auto& p : read_csv(dir / "both" / "sweep.csv").rows)
    if (number(p.at("workload.rate")) <= r2) {
      CHECK(number(p.at("ttft_p90_s")) <= 0.05);
      CHECK(number(p.at("tpot_p90_s")) <= 0.004);
    }
}

TEST_CASE("a sweep names each warning its points' configs give once, with how many points", "[cli][sweep][warnings]") {
  const fs::path dir = scratch("warnings");
  write_base(dir, "[router]\nweight_kv = 3\n");
  const fs::path file = write_sweep(dir, "grid.ini", "workload.rate = 10, 20\nscheduler.chunked_prefill = true, false\n"
                                                     "scheduler.chunk_size = 32\n");
  const auto o = run_cli(sweep_cmd(file, dir / "out", "--dry-run"));
  INFO(o.output);
  REQUIRE(o.status == 0);
  const std::string all = "testbed sweep: warning (4 of 4 points): router.weight_kv: not used: router.type is round_robin";
  const std::string half = "testbed sweep: warning (2 of 4 points): scheduler.chunk_size: not used: scheduler.chunked_prefill is false";
  CHECK_THAT(o.output, Catch::Contains(all) && Catch::Contains(half));
  CHECK(o.output.find(all) == o.output.rfind(all));  // once
}
