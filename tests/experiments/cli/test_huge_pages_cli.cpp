// driver.huge_pages (experiments/cli/huge_pages.h): a simulation executes
// itself again with glibc's huge-page tunables. The results file says what
// applied (/run huge_pages), the results do not change, a bad value or an
// impossible "on" is an exit-2 error naming the key, the user's own
// GLIBC_TUNABLES is left as it is, and the executed process puts the
// environment back before anything it starts can see it.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "experiments/cli/huge_pages.h"
#include "support/cli.h"
#include "support/h5_read.h"

namespace fs = std::filesystem;
using testbed_test::run_cli;
using testbed_test::ScopedEnv;

namespace {

// A small fleet: 8 instances, 2,000 requests of fleet_speed.ini's workload.
std::string fleet_run(const fs::path& out) {
  return "run experiments/fleet_speed.ini --workload.num_requests=2000 --fleet.num_instances=8 --output " + out.string() +
         " --overwrite";
}

std::string applied(const fs::path& dir) { return testbed_test::read_text_attr(dir / "results.h5", "run", "huge_pages"); }

}  // namespace

TEST_CASE("driver.huge_pages changes where memory lies, not the results", "[cli][huge_pages]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_huge_pages", "modes");
  const std::string why = testbed::huge_pages_unavailable_reason();
  INFO("huge pages here: " << (why.empty() ? "available" : why));
  for (const char* mode : {"off", "auto", "on"}) {
    const auto o = run_cli(fleet_run(dir / mode) + " --driver.huge_pages=" + mode);
    INFO(mode << ": " << o.output);
    if (why.empty() || std::string(mode) != "on") {
      REQUIRE(o.status == 0);
      CHECK(applied(dir / mode) == (std::string(mode) == "off" || !why.empty() ? "off" : "on"));
    } else {
      CHECK(o.status == 2);
      CHECK(o.output.find("driver.huge_pages: on, but") != std::string::npos);
      CHECK_FALSE(fs::exists(dir / mode / "results.h5"));
    }
  }
  for (const char* group : {"requests", "summary"}) {
    INFO(group);
    CHECK(testbed_test::same_bits(testbed_test::read_group(dir / "off" / "results.h5", group),
                                  testbed_test::read_group(dir / "auto" / "results.h5", group)));
  }
  // A real (wall-clock) run is left alone under auto.
  const auto real = run_cli("run experiments/quickstart.ini --workload.num_requests=2 --output " +
                            (dir / "real").string() + " --overwrite");
  INFO(real.output);
  REQUIRE(real.status == 0);
  CHECK(applied(dir / "real") == "off");
}

TEST_CASE("a bad driver.huge_pages is an exit-2 error naming the key", "[cli][huge_pages]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_huge_pages", "bad");
  const auto o = run_cli(fleet_run(dir) + " --driver.huge_pages=maybe");
  INFO(o.output);
  CHECK(o.status == 2);
  CHECK(o.output.find("driver.huge_pages: must be auto, on or off") != std::string::npos);
}

TEST_CASE("the user's GLIBC_TUNABLES for malloc's pages is used as it is", "[cli][huge_pages]") {
  const fs::path dir = testbed_test::scratch_dir("testbed_huge_pages", "user");
  ScopedEnv tunables("GLIBC_TUNABLES", "glibc.malloc.top_pad=1048576");
  const auto o = run_cli(fleet_run(dir) + " --driver.huge_pages=on");
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK(applied(dir) == "environment");
}

TEST_CASE("the executed process puts GLIBC_TUNABLES back as it was", "[cli][huge_pages]") {
  // What the switch leaves for the process it executes: the tunables appended
  // to the user's, and the user's value beside them.
  {
    ScopedEnv marker("TESTBED_HUGE_PAGES_EXEC", "=glibc.malloc.check=0");
    ScopedEnv tunables("GLIBC_TUNABLES", std::string("glibc.malloc.check=0:") + testbed::kHugePageTunables);
    testbed::restore_environment_after_huge_pages_exec();
    REQUIRE(std::getenv("GLIBC_TUNABLES") != nullptr);
    CHECK(std::string(std::getenv("GLIBC_TUNABLES")) == "glibc.malloc.check=0");
    CHECK(std::getenv("TESTBED_HUGE_PAGES_EXEC") == nullptr);
    CHECK(testbed::huge_pages_state() == "on");
  }
  {
    // A user without GLIBC_TUNABLES ends without it.
    ScopedEnv marker("TESTBED_HUGE_PAGES_EXEC", "-");
    ScopedEnv tunables("GLIBC_TUNABLES", testbed::kHugePageTunables);
    testbed::restore_environment_after_huge_pages_exec();
    CHECK(std::getenv("GLIBC_TUNABLES") == nullptr);
    CHECK(std::getenv("TESTBED_HUGE_PAGES_EXEC") == nullptr);
  }
  // Settled: asking again executes nothing (this test would not return).
  testbed::apply_huge_pages("on", true);
  CHECK(testbed::huge_pages_state() == "on");
}
