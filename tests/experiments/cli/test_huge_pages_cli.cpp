// driver.huge_pages (experiments/cli/huge_pages.h): a simulation sets glibc's
// malloc up in its own process and advises its heap for transparent huge
// pages. The results file says what applied (/run huge_pages), the results do
// not change, a bad value or an impossible "on" is an exit-2 error naming the
// key, the user's own malloc settings are left as they are, the heap's
// first growth, every later one, and a large table's memory before it is
// filled are advised (the kernel's VmFlags say so), and a freed top is kept.
#include <catch2/catch.hpp>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/flat_hash_map.h"
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

// The kernel's VmFlags for the mapping that holds p ("" when none does).
std::string vm_flags(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t from = 0, to = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> from >> dash >> to && dash == '-') {
      inside = from <= at && at < to;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool advised(const void* p) { return (" " + vm_flags(p) + " ").find(" hg ") != std::string::npos; }

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

TEST_CASE("the user's own malloc settings are used as they are", "[cli][huge_pages]") {
  // glibc's tunables, and the older variable names it still reads.
  const std::pair<const char*, const char*> settings[] = {{"GLIBC_TUNABLES", "glibc.malloc.top_pad=1048576"},
                                                           {"MALLOC_ARENA_MAX", "2"},
                                                           {"MALLOC_TRIM_THRESHOLD_", "131072"}};
  for (const auto& [name, value] : settings) {
    const fs::path dir = testbed_test::scratch_dir("testbed_huge_pages", std::string("user_") + name);
    ScopedEnv user(name, value);
    const auto o = run_cli(fleet_run(dir) + " --driver.huge_pages=on");
    INFO(name << "=" << value << ": " << o.output);
    REQUIRE(o.status == 0);
    CHECK(applied(dir) == "environment");
  }
}

TEST_CASE("the switch advises the heap, and then each growth of it", "[cli][huge_pages]") {
  const std::string why = testbed::huge_pages_unavailable_reason();
  REQUIRE(testbed::huge_pages_state() == "off");
  if (!why.empty()) {
    WARN("huge pages are not here (" << why << "): only the refusal is checked");
    CHECK_THROWS_WITH(testbed::apply_huge_pages("on", false), Catch::Contains("driver.huge_pages: on, but " + why));
    CHECK(testbed::huge_pages_state() == "off");
    return;
  }
  testbed::apply_huge_pages("auto", /*simulated=*/false);  // auto leaves a real run alone
  CHECK(testbed::huge_pages_state() == "off");
  testbed::apply_huge_pages("on", /*simulated=*/false);
  REQUIRE(testbed::huge_pages_state() == "on");
  // An allocation comes from the heap, which is advised (its start may lie
  // in the top the heap had before; its end lies in the growth).
  constexpr size_t kSmall = 1 << 20, kLarge = size_t{200} << 20;
  std::vector<char*> kept{static_cast<char*>(std::malloc(kSmall))};
  const char* const small_end = kept.back() + kSmall - 1;
  CHECK(advised(small_end));
  // The first allocation no free chunk fits starts the free top, which the
  // switch put on a 2 MiB boundary (glibc's chunk header is 16 bytes before it).
  CHECK((reinterpret_cast<uintptr_t>(kept.back()) - 16) % (uintptr_t{2} << 20) == 0);
  // Past the first 1 GiB the heap grows again: a new mapping, not advised
  // until the next call (only each block's first page is touched).
  char* const end = static_cast<char*>(sbrk(0));
  while (static_cast<char*>(sbrk(0)) <= end) {
    kept.push_back(static_cast<char*>(std::malloc(kLarge)));
    REQUIRE(kept.back() != nullptr);
    static_cast<volatile char*>(kept.back())[0] = 1;
  }
  const char* const grown = kept.back() + kLarge - 1;
  REQUIRE(grown >= end);
  CHECK_FALSE(advised(grown));
  testbed::advise_heap_growth();
  CHECK(advised(grown));
  CHECK(advised(small_end));
  // Freed, the blocks join the free top, which stays (M_TRIM_THRESHOLD -1):
  // handed back, it would come back as a growth on small pages.
  char* const grown_end = static_cast<char*>(sbrk(0));
  for (char* p : kept) std::free(p);
  CHECK(static_cast<char*>(sbrk(0)) == grown_end);
  // A large table advises its memory between allocating and filling it, with
  // no call from its owner. With no padding the heap grows by exactly the
  // table, which then lies in the newest growth, at the heap's end.
  REQUIRE(mallopt(M_TOP_PAD, 0) == 1);
  malloc_trim(0);  // the free top goes back to the kernel
  {
    char* const old_end = static_cast<char*>(sbrk(0));
    testbed::FlatHashMap64<uint64_t> table(size_t{1} << 21);  // 4M slots of 16 bytes: 64 MB
    char* const new_end = static_cast<char*>(sbrk(0));
    REQUIRE(new_end - old_end >= (32 << 20));
    CHECK(advised(new_end - 1));
  }
  // Settled: asking again changes nothing.
  testbed::apply_huge_pages("off", true);
  CHECK(testbed::huge_pages_state() == "on");
}
