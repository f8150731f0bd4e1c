// Sweep files: lists, ranges and zips expand to the points a user expects;
// malformed files name their line; ids and seeds depend only on a point's own
// values; bisection finds a known threshold.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/common/config_error.h"
#include "experiments/sweep/bisection.h"
#include "experiments/sweep/sweep_file.h"
#include "experiments/sweep/sweep_points.h"
#include "support/cli.h"

namespace fs = std::filesystem;
using namespace testbed;

namespace {

fs::path scratch(const std::string& name) { return testbed_test::scratch_dir("testbed_sweep_file", name); }

// A sweep file in its own directory, beside a base config with a tiny model.
fs::path write_sweep(const std::string& name, const std::string& text) {
  const fs::path dir = scratch(name);
  std::ofstream(dir / "micro.json") << R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512})";
  std::ofstream(dir / "base.ini") << "[model]\nconfig = micro.json\n[executor]\nkind = sim\n"
                                     "[cost_model]\nkind = linear\n[workload]\nnum_requests = 8\nseed = 7\n";
  std::ofstream(dir / "sweep.ini") << text;
  return dir / "sweep.ini";
}

std::string error_of(const std::string& name, const std::string& text) {
  try {
    read_sweep_file(write_sweep(name, text).string());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("lists, range() and geometric() give the values written", "[sweep]") {
  CHECK(expand_values("256, 512,1024", "f:1") == std::vector<std::string>{"256", "512", "1024"});
  CHECK(expand_values("\"a, b\", c", "f:1") == std::vector<std::string>{"a, b", "c"});
  CHECK(expand_values("range(1, 4, 1)", "f:1") == std::vector<std::string>{"1", "2", "3", "4"});
  // Decimal steps print as written, not as 0.30000000000000004; STOP is included when reached.
  CHECK(expand_values("range(0.1, 0.5, 0.1)", "f:1") == std::vector<std::string>{"0.1", "0.2", "0.3", "0.4", "0.5"});
  CHECK(expand_values("range(0, 10, 4)", "f:1") == std::vector<std::string>{"0", "4", "8"});
  CHECK(expand_values("geometric(1024, 16384, 2)", "f:1") ==
        std::vector<std::string>{"1024", "2048", "4096", "8192", "16384"});
  CHECK(expand_values("geometric(0.5, 5, 3)", "f:1") == std::vector<std::string>{"0.5", "1.5", "4.5"});
  CHECK_THROWS_WITH(expand_values("range(1, 4)", "f:3"), Catch::Contains("f:3") && Catch::Contains("3 numbers"));
  CHECK_THROWS_WITH(expand_values("range(4, 1, 1)", "f:3"), Catch::Contains("STOP is below START"));
  CHECK_THROWS_WITH(expand_values("range(1, 4, 0)", "f:3"), Catch::Contains("STEP must be > 0"));
  CHECK_THROWS_WITH(expand_values("geometric(1, 4, 1)", "f:3"), Catch::Contains("FACTOR must be > 1"));
  CHECK_THROWS_WITH(expand_values("range(1, x, 1)", "f:3"), Catch::Contains("'x' is not a number"));
  CHECK_THROWS_WITH(expand_values("1, , 2", "f:3"), Catch::Contains("empty value"));
}

TEST_CASE("points are the product of the lists, zipped lists in step", "[sweep]") {
  const SweepFile s = read_sweep_file(write_sweep("product", "[sweep]\nbase = base.ini\n"
                                                             "scheduler.policy = fcfs, sjf\n"
                                                             "workload.rate = 1, 2, 3\n")
                                          .string());
  const std::vector<PointValues> grid = expand_grid(s);
  REQUIRE(grid.size() == 6);
  // The first key is outermost.
  CHECK(grid[0] == PointValues{{"scheduler.policy", "fcfs"}, {"workload.rate", "1"}});
  CHECK(grid[2] == PointValues{{"scheduler.policy", "fcfs"}, {"workload.rate", "3"}});
  CHECK(grid[3] == PointValues{{"scheduler.policy", "sjf"}, {"workload.rate", "1"}});
  std::set<std::string> ids;
  for (const PointValues& p : grid) ids.insert(point_id(p));
  CHECK(ids.size() == 6);

  const SweepFile z = read_sweep_file(write_sweep("zip", "[sweep]\nbase = base.ini\n"
                                                         "scheduler.max_num_seqs = 8, 16, 32\n"
                                                         "workload.rate = 1, 2\n"
                                                         "scheduler.max_batch_tokens = 256, 512, 1024\n"
                                                         "zip = scheduler.max_num_seqs, scheduler.max_batch_tokens\n")
                                          .string());
  const std::vector<PointValues> zg = expand_grid(z);
  REQUIRE(zg.size() == 6);  // 3 zipped pairs x 2 rates
  for (const PointValues& p : zg) {
    REQUIRE(p.size() == 3);
    CHECK(p[0].first == "scheduler.max_num_seqs");  // values stay in the file's key order
    CHECK(std::stoi(p[2].second) == 32 * std::stoi(p[0].second));
  }
  CHECK(zg[0][1].second == "1");
  CHECK(zg[1][1].second == "2");
  // A zipped list may repeat a value; the tuples differ.
  const SweepFile rep = read_sweep_file(write_sweep("ziprepeat", "[sweep]\nbase = base.ini\n"
                                                                 "scheduler.kv_reservation = paged, paged, oracle\n"
                                                                 "scheduler.admission_watermark = 0, 0.01, 0\n"
                                                                 "zip = scheduler.kv_reservation, "
                                                                 "scheduler.admission_watermark\n")
                                            .string());
  CHECK(expand_grid(rep).size() == 3);
}

TEST_CASE("malformed sweep files name the file and line", "[sweep]") {
  CHECK_THAT(error_of("nobase", "[sweep]\nworkload.rate = 1\n"), Catch::Contains("base = CONFIG.ini is missing"));
  CHECK_THAT(error_of("nosection", "workload.rate = 1\n"), Catch::Contains("sweep.ini:1") && Catch::Contains("before any"));
  CHECK_THAT(error_of("missingbase", "[sweep]\nbase = nowhere.ini\n"),
             Catch::Contains("sweep.ini:2") && Catch::Contains("base config not found"));
  CHECK_THAT(error_of("twice", "[sweep]\nbase = base.ini\nworkload.rate = 1\nworkload.rate = 2\n"),
             Catch::Contains("sweep.ini:4") && Catch::Contains("swept twice"));
  CHECK_THAT(error_of("word", "[sweep]\nbase = base.ini\nrate = 1, 2\n"),
             Catch::Contains("sweep.ini:3") && Catch::Contains("'rate' is neither"));
  CHECK_THAT(error_of("zipshort", "[sweep]\nbase = base.ini\nworkload.rate = 1, 2\nscheduler.policy = fcfs\n"
                                  "zip = workload.rate, scheduler.policy\n"),
             Catch::Contains("sweep.ini:5") && Catch::Contains("has 1 values"));
  CHECK_THAT(error_of("zipunknown", "[sweep]\nbase = base.ini\nworkload.rate = 1, 2\nzip = workload.rate, a.b\n"),
             Catch::Contains("a.b is not a swept key"));
  CHECK_THAT(error_of("dup", "[sweep]\nbase = base.ini\nworkload.rate = 1, 2, 1\n"),
             Catch::Contains("sweep.ini:3") && Catch::Contains("'1' is listed twice"));
  CHECK_THAT(error_of("zipdup", "[sweep]\nbase = base.ini\nworkload.rate = 1, 1\nscheduler.policy = fcfs, fcfs\n"
                                "zip = workload.rate, scheduler.policy\n"),
             Catch::Contains("sweep.ini:5") && Catch::Contains("entry 2 repeats"));
  CHECK_THAT(error_of("seeds", "[sweep]\nbase = base.ini\nseeds = random\n"), Catch::Contains("sweep.ini:3"));
  CHECK_THAT(error_of("noeq", "[sweep]\nbase = base.ini\nworkload.rate\n"), Catch::Contains("expected 'key = value'"));
  CHECK_THAT(error_of("header", "[sweep\n"), Catch::Contains("malformed section header"));
  CHECK_THAT(error_of("quote", "[sweep]\nbase = base.ini\ntrace.path = \"a, b\n"), Catch::Contains("unbalanced"));
}

TEST_CASE("every point is validated against the run schema, naming the sweep line", "[sweep]") {
  const auto resolve_all = [](const std::string& name, const std::string& text, std::vector<std::string> over = {}) {
    const SweepFile s = read_sweep_file(write_sweep(name, text).string());
    const PointResolver r(s, over);
    for (const PointValues& p : expand_grid(s)) r.resolve(p);
  };
  CHECK_THROWS_WITH(resolve_all("unknown", "[sweep]\nbase = base.ini\nscheduler.bogus = 1, 2\n"),
                    Catch::Contains("sweep.ini:3") && Catch::Contains("scheduler.bogus"));
  CHECK_THROWS_WITH(resolve_all("badvalue", "[sweep]\nbase = base.ini\nscheduler.max_num_seqs = 8, many\n"),
                    Catch::Contains("sweep.ini:3") && Catch::Contains("scheduler.max_num_seqs=many"));
  CHECK_THROWS_WITH(resolve_all("invalid", "[sweep]\nbase = base.ini\nscheduler.max_num_seqs = 8, 0\n"),
                    Catch::Contains("scheduler.max_num_seqs") && Catch::Contains("sweep.ini:3"));
  CHECK_THROWS_WITH(resolve_all("override", "[sweep]\nbase = base.ini\nworkload.rate = 1, 2\n", {"--workload.rate=3"}),
                    Catch::Contains("overrides a key the sweep file sweeps"));
  CHECK_THROWS_WITH(resolve_all("badoverride", "[sweep]\nbase = base.ini\nworkload.rate = 1, 2\n", {"--cache.nope=3"}),
                    Catch::Contains("cache.nope"));
  CHECK_NOTHROW(resolve_all("good", "[sweep]\nbase = base.ini\nworkload.rate = 1, 2\n", {"--cache.num_blocks=64"}));
}

TEST_CASE("ids and derived seeds depend only on the point's own values", "[sweep]") {
  const PointValues a{{"workload.rate", "2"}, {"scheduler.policy", "fcfs"}};
  const PointValues b{{"scheduler.policy", "fcfs"}, {"workload.rate", "2"}};
  CHECK(point_id(a) == point_id(b));  // key order does not matter
  CHECK(point_id(a).size() == 12);
  CHECK(point_id(a) != point_id({{"workload.rate", "3"}, {"scheduler.policy", "fcfs"}}));
  CHECK(derive_seed(7, "workload.seed", a) == derive_seed(7, "workload.seed", b));
  CHECK(derive_seed(7, "workload.seed", a) != derive_seed(8, "workload.seed", a));
  CHECK(derive_seed(7, "workload.seed", a) != derive_seed(7, "sampling.seed", a));
  CHECK(derive_seed(7, "workload.seed", a) < (1ULL << 31));

  // Adding a value to a list leaves the other points' configs, seeds included, unchanged.
  const SweepFile two = read_sweep_file(
      write_sweep("two", "[sweep]\nbase = base.ini\nworkload.rate = 1, 2\nscheduler.policy = fcfs\n").string());
  const SweepFile three = read_sweep_file(
      write_sweep("three", "[sweep]\nbase = base.ini\nworkload.rate = 1, 2, 4\nscheduler.policy = fcfs\n").string());
  const PointResolver r2(two, {}), r3(three, {});
  const SweepPoint p2 = r2.resolve(expand_grid(two)[1]), p3 = r3.resolve(expand_grid(three)[1]);
  CHECK(p2.id == p3.id);
  std::string seed2, seed3, model_seed;
  for (const auto& [k, v] : p2.resolved) {
    if (k == "workload.seed") seed2 = v;
    if (k == "model.seed") model_seed = v;
  }
  for (const auto& [k, v] : p3.resolved)
    if (k == "workload.seed") seed3 = v;
  CHECK(seed2 == seed3);
  CHECK(seed2 == std::to_string(derive_seed(7, "workload.seed", expand_grid(two)[1])));
  CHECK(model_seed == "0");  // the model's dummy weights are never re-seeded
  CHECK(std::find(PointResolver::derived_seed_keys().begin(), PointResolver::derived_seed_keys().end(),
                  "workload.seed") != PointResolver::derived_seed_keys().end());

  // seeds = shared: every point runs the base seed; a swept seed is the point's own.
  const SweepFile shared = read_sweep_file(
      write_sweep("shared", "[sweep]\nbase = base.ini\nworkload.rate = 1, 2\nseeds = shared\n").string());
  for (const auto& [k, v] : PointResolver(shared, {}).resolve(expand_grid(shared)[1]).resolved)
    if (k == "workload.seed") CHECK(v == "7");
  const SweepFile replicas = read_sweep_file(
      write_sweep("replicas", "[sweep]\nbase = base.ini\nworkload.seed = 11, 12\n").string());
  for (const auto& [k, v] : PointResolver(replicas, {}).resolve(expand_grid(replicas)[1]).resolved)
    if (k == "workload.seed") CHECK(v == "12");
}

TEST_CASE("bisection brackets a known threshold within the tolerance", "[sweep][search]") {
  for (double threshold : {1.0, 3.3, 17.25, 63.9}) {
    Bisection b(1, 64, 0.25);
    int rounds = 0;
    while (!b.done()) {
      for (double v : b.next()) b.record(v, v <= threshold);  // a synthetic metric: holds up to the threshold
      ++rounds;
    }
    CHECK(b.status() == "found");
    CHECK(b.highest_holding() <= threshold);
    CHECK(b.lowest_failing() > threshold);
    CHECK(b.lowest_failing() - b.highest_holding() <= 0.25);
    CHECK(b.num_probes() == rounds + 1);  // both ends in the first round, then one probe a round
  }
  Bisection below(1, 64, 1);
  for (double v : below.next()) below.record(v, false);
  CHECK(below.done());
  CHECK(below.status() == "below_range");
  CHECK(std::isnan(below.highest_holding()));
  Bisection above(1, 64, 1);
  for (double v : above.next()) above.record(v, true);
  CHECK(above.status() == "above_range");
  CHECK(above.highest_holding() == 64);
  CHECK(std::isnan(above.lowest_failing()));
  // Whole numbers only: the answer is the integer threshold itself.
  Bisection whole(0, 1000, 1, true);
  while (!whole.done())
    for (double v : whole.next()) {
      CHECK(v == std::floor(v));
      whole.record(v, v <= 613);
    }
  CHECK(whole.highest_holding() == 613);
  CHECK(whole.lowest_failing() == 614);
  Bisection strict(1, 2, 0.5);
  CHECK_THROWS_AS(strict.record(1.5, true), std::logic_error);  // not asked for
}
