// OptionTable: typed keys from INI text and the command line, errors that name
// the file, line and key (and never hang on Boost's placeholders), shared keys,
// paths beside the INI file; Choice: a component and its own keys.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/common/choice.h"
#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/scheduling_policy.h"
#include "sim/hardware_spec.h"
#include "support/scratch.h"

using namespace testbed;

namespace {

struct Fields {
  int n = 4;
  int64_t big = 0;
  uint64_t seed = 1;
  double x = 0.5;
  bool on = false;
  std::string name = "a";
  std::string file;
  void bind(OptionTable& t) {
    t.add("s.n", &n, "an int");
    t.add("s.big", &big, "an int64");
    t.add("s.seed", &seed, "a uint64");
    t.add("s.x", &x, "a double");
    t.add("s.on", &on, "a bool");
    t.add("t.name", &name, "text");
    t.add_path("t.file", &file, "a path");
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const std::string& ini, const std::vector<std::string>& args = {}) {
  Fields f;
  OptionTable t;
  f.bind(t);
  return error_of([&] { t.parse(args, &ini, "exp.ini"); });
}

}  // namespace

TEST_CASE("option values parse by type and the command line wins over the file", "[options]") {
  Fields f;
  OptionTable t;
  f.bind(t);
  const std::string ini = "[s]\nn = 7\nbig = -9000000000\nseed = 18446744073709551615\nx = 2.5e-3 # comment\n"
                          "on = yes\n[t]\nname = hello world\n";
  t.parse({"--s.n=9", "--t.name", "cli"}, &ini, "exp.ini");
  CHECK(f.n == 9);
  CHECK(f.big == -9000000000LL);
  CHECK(f.seed == std::numeric_limits<uint64_t>::max());
  CHECK(f.x == 2.5e-3);
  CHECK(f.on);
  CHECK(f.name == "cli");
  CHECK(t.was_set("s.x"));
  CHECK_FALSE(t.was_set("t.file"));
  CHECK(t.value("s.n") == "9");
  // The resolved table reads back to the same values.
  Fields g;
  OptionTable u;
  g.bind(u);
  const std::string again = t.to_ini();
  u.parse({}, &again, "resolved.ini");
  CHECK(g.n == 9);
  CHECK(g.x == f.x);
  CHECK(g.name == "cli");
  CHECK(g.seed == f.seed);
}

TEST_CASE("bad values name the file and the key", "[options]") {
  CHECK_THAT(parse_error("[s]\nn = many\n"), Catch::Contains("exp.ini") && Catch::Contains("s.n"));
  CHECK_THAT(parse_error("[s]\nn = 256.7\n"), Catch::Contains("s.n"));           // no silent truncation
  CHECK_THAT(parse_error("[s]\nn = 4294967552\n"), Catch::Contains("s.n"));      // no silent narrowing
  CHECK_THAT(parse_error("[s]\nseed = -1\n"), Catch::Contains("s.seed"));        // no wrap-around
  CHECK_THAT(parse_error("[s]\nx = inf\n"), Catch::Contains("s.x"));             // finite numbers only
  CHECK_THAT(parse_error("[s]\nx = nan\n"), Catch::Contains("s.x"));
  CHECK_THAT(parse_error("[s]\non = maybe\n"), Catch::Contains("s.on"));
  CHECK_THAT(parse_error("", {"--s.x=1e999"}), Catch::Contains("command line") && Catch::Contains("s.x"));
}

TEST_CASE("unknown, repeated, abbreviated and malformed keys are errors", "[options]") {
  CHECK_THAT(parse_error("[s]\nbogus = 1\n"), Catch::Contains("exp.ini") && Catch::Contains("s.bogus"));
  CHECK_THAT(parse_error("n = 1\n"), Catch::Contains("'n'"));  // a key outside any section
  CHECK_THAT(parse_error("[s]\nn = 1\nn = 2\n"), Catch::Contains("s.n") && Catch::Contains("twice"));
  CHECK_THAT(parse_error("", {"--s.nope=1"}), Catch::Contains("--s.nope"));
  CHECK_THAT(parse_error("", {"--t.nam=x"}), Catch::Contains("--t.nam"));  // no guessing of prefixes
  CHECK_THAT(parse_error("", {"--s.n=1", "--s.n=2"}), Catch::Contains("twice"));
  CHECK_THAT(parse_error("", {"--s.n"}), Catch::Contains("needs a value"));
  CHECK_THAT(parse_error("", {"stray"}), Catch::Contains("stray"));
  CHECK_THAT(parse_error("[s]\nn = 1\nthis line has no equals sign\n"), Catch::Contains("exp.ini:3"));
}

TEST_CASE("Boost placeholders in user text never hang the parser", "[options]") {
  // Boost 1.74 loops forever formatting an error whose text holds its own
  // placeholders; every path here must return an error at once.
  for (const std::string token : {"%value%", "%canonical_option%", "%original_token%", "%option%", "%prefix%"}) {
    INFO(token);
    CHECK_THAT(parse_error("[s]\nn = " + token + "\n"), Catch::Contains("s.n"));
    CHECK_THAT(parse_error("[s]\nkey" + token + " = 1\n"), Catch::Contains(token));
    CHECK_THAT(parse_error("", {"--s.n=" + token}), Catch::Contains(token));
    CHECK_THAT(parse_error("", {"--s." + token + "=1"}), Catch::Contains(token));
    CHECK_THAT(parse_error("[s]\n" + token + "\n"), Catch::Contains("exp.ini:2"));
    CHECK_THAT(error_of([&] { HardwareSpec::from_ini_text("[compute]\nbf16_tflops = " + token + "\n", "gpu.ini"); }),
               Catch::Contains("gpu.ini") && Catch::Contains("compute.bf16_tflops"));
    CHECK_THAT(error_of([&] { HardwareSpec::from_ini_text("[compute]\n" + token + " = 1\n", "gpu.ini"); }),
               Catch::Contains(token));
  }
}

TEST_CASE("required keys must be set", "[options]") {
  double peak = 0;
  OptionTable t;
  t.add_required("compute.peak", &peak, "required");
  const std::string empty;
  CHECK_THAT(error_of([&] { t.parse({}, &empty, "gpu.ini"); }), Catch::Contains("compute.peak") &&
                                                                   Catch::Contains("required"));
}

TEST_CASE("a key bound twice fills both fields, and must agree in type and default", "[options]") {
  int a = 3, b = 3;
  OptionTable t;
  t.add("r.shared", &a, "first component");
  t.add("r.shared", &b, "second component");
  t.set("r.shared", "11");
  CHECK(a == 11);
  CHECK(b == 11);
  CHECK(t.resolved().size() == 1);
  double c = 3;
  int d = 4;
  CHECK_THROWS_AS(t.add("r.shared", &c, "another type"), std::logic_error);
  CHECK_THROWS_AS(t.add("r.shared", &d, "another default"), std::logic_error);
}

TEST_CASE("flags are command-line only and not part of the resolved config", "[options]") {
  Fields f;
  std::string out;
  OptionTable t;
  f.bind(t);
  t.add_flag("output", &out, "results directory");
  const std::string ini = "[s]\nn = 2\n";
  t.parse({"--output", "dir"}, &ini, "exp.ini");
  CHECK(out == "dir");
  for (const auto& [key, value] : t.resolved()) CHECK(key != "output");
  const std::string with_flag = "output = dir\n";
  CHECK_FALSE(parse_error(with_flag).empty());
}

TEST_CASE("relative paths resolve beside the INI file when they are not found here", "[options]") {
  namespace fs = std::filesystem;
  const fs::path dir = testbed_test::scratch_root("testbed_options");
  std::ofstream(dir / "model.json") << "{}";
  Fields f;
  OptionTable t;
  f.bind(t);
  const std::string ini = "[t]\nfile = model.json\n";
  t.parse({}, &ini, (dir / "exp.ini").string());
  CHECK(f.file == (dir / "model.json").string());
  Fields g;
  OptionTable u;
  g.bind(u);
  const std::string missing = "[t]\nfile = absent.json\n";
  u.parse({}, &missing, (dir / "exp.ini").string());
  CHECK(g.file == "absent.json");  // left as given: its user names it in the error
  fs::remove_all(dir);
}

TEST_CASE("a Choice binds every candidate's keys and validates them all", "[options][registry]") {
  Choice<SchedulingPolicyRegistry> policy{"scheduler.policy", "fcfs", "scheduling policy"};
  OptionTable t;
  policy.bind(t);
  CHECK(t.contains("scheduler.policy"));
  CHECK(t.contains("scheduler.priority_aging_s"));  // the priority policy's own key
  CHECK_NOTHROW(policy.validate());
  t.set("scheduler.priority_aging_s", "-1");  // a candidate not chosen, still checked
  CHECK_THAT(error_of([&] { policy.validate(); }), Catch::StartsWith("scheduler.priority_aging_s"));
  t.set("scheduler.priority_aging_s", "2");
  t.set("scheduler.policy", "lottery");
  CHECK_THAT(error_of([&] { policy.validate(); }), Catch::StartsWith("scheduler.policy") &&
                                                       Catch::Contains("fcfs") && Catch::Contains("sjf"));
  // Copies are deep: the copy's keys do not move with the original's.
  t.set("scheduler.policy", "priority");
  const Choice<SchedulingPolicyRegistry> copy = policy;
  t.set("scheduler.priority_aging_s", "5");
  OptionTable v;
  Choice<SchedulingPolicyRegistry> reread = copy;
  reread.bind(v);
  CHECK(v.value("scheduler.priority_aging_s") == "2");
  CHECK(v.value("scheduler.policy") == "priority");
  CHECK(copy.create() != nullptr);
}

TEST_CASE("a key of a candidate that is not chosen is reported unused, with why", "[options][registry]") {
  const auto unused_after = [](const std::vector<std::string>& args) {
    Choice<SchedulingPolicyRegistry> policy{"scheduler.policy", "fcfs", "scheduling policy"};
    OptionTable t;
    policy.bind(t);
    t.parse(args);
    return t.unused_keys();
  };
  const std::vector<std::string> u = unused_after({"--scheduler.priority_aging_s=5"});
  REQUIRE(u.size() == 1);
  CHECK(u[0] == "scheduler.priority_aging_s: not used: scheduler.policy is fcfs (it applies to scheduler.policy = priority)");
  // Chosen, it is used; set to its default it changes nothing (a resolved config.ini states every key).
  CHECK(unused_after({"--scheduler.priority_aging_s=5", "--scheduler.policy=priority"}).empty());
  OptionTable defaults;
  Choice<SchedulingPolicyRegistry> p{"scheduler.policy", "fcfs", "scheduling policy"};
  p.bind(defaults);
  const std::string aging_default = defaults.default_value("scheduler.priority_aging_s");
  CHECK(unused_after({"--scheduler.priority_aging_s=" + aging_default}).empty());
  CHECK(unused_after({}).empty());
}

TEST_CASE("unused keys: conditions nest, resolve, suspend, and follow inheritance", "[options]") {
  std::string mode = "auto", router = "a";
  double a_weight = 1, b_weight = 1, pool_weight = 1, size = 1;
  std::string pool_router = "a";
  OptionTable t;
  t.add("driver.mode", &mode, "auto | sim | real");
  t.push_condition("driver.mode", "sim");
  t.add("router.type", &router, "a | b");
  t.push_condition("router.type", "b");
  t.add("router.weight", &b_weight, "b's weight");
  t.pop_condition();
  t.suspend_conditions();
  t.add("pool.size", &size, "used in every mode");
  t.resume_conditions();
  t.pop_condition();
  t.push_prefix("pool.p.");
  t.add("router.type", &pool_router, "a | b");
  t.push_condition("router.type", "b");  // named after the prefix: pool.p.router.type
  t.add("router.weight", &pool_weight, "b's weight");
  t.pop_condition();
  t.pop_prefix();
  (void)a_weight;
  t.parse({"--router.type=b", "--router.weight=3", "--pool.size=2"});
  // driver.mode = auto is not sim until resolved: router.* is unused, pool.size never is.
  std::vector<std::string> u = t.unused_keys();
  REQUIRE(u.size() == 2);
  CHECK(u[0] == "router.type: not used: driver.mode is auto (it applies to driver.mode = sim)");
  CHECK(u[1] == "router.weight: not used: driver.mode is auto (it applies to driver.mode = sim)");
  t.resolve_as("driver.mode", "sim");
  CHECK(t.unused_keys().empty());
  // A top-level key a pool inherits is used where the pool's own key is.
  std::string mode2 = "sim", router2 = "a", pool_router2 = "b";
  double w2 = 1, pw2 = 1;
  OptionTable v;
  v.add("driver.mode", &mode2, "");
  v.add("router.type", &router2, "");
  v.push_condition("router.type", "b");
  v.add("router.weight", &w2, "");
  v.pop_condition();
  v.push_prefix("pool.p.");
  v.add("router.type", &pool_router2, "");
  v.push_condition("router.type", "b");
  v.add("router.weight", &pw2, "");
  v.pop_condition();
  v.pop_prefix();
  v.parse({"--router.weight=3", "--pool.p.router.type=b"});
  v.inherit("pool.p.");
  CHECK(pw2 == 3);
  CHECK(v.unused_keys().empty());
}

TEST_CASE("a boolean flag may stand alone", "[options]") {
  bool overwrite = false;
  std::string out;
  Fields f;
  OptionTable t;
  f.bind(t);
  t.add_flag("overwrite", &overwrite, "replace");
  t.add_flag("output", &out, "dir");
  t.parse({"--overwrite", "--output", "d", "--s.n=3"});
  CHECK(overwrite);
  CHECK(out == "d");
  CHECK(f.n == 3);
  bool last = false;
  OptionTable u;
  u.add_flag("overwrite", &last, "replace");
  u.parse({"--overwrite"});
  CHECK(last);
  CHECK_THAT(error_of([&] { OptionTable w; int n = 0; w.add_flag("n", &n, ""); w.parse({"--n"}); }),
             Catch::Contains("--n needs a value"));
}
