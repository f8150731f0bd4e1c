// The README lists every /summary key with the unit and meaning units.cpp gives
// it, and names every column of every table: the documentation a results file
// points to cannot drift from what the file holds.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "engine/metrics/units.h"

using namespace testbed;

namespace {

std::string readme() {
  std::ifstream in(std::string(TESTBED_SOURCE_DIR) + "/README.md");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("the README lists every summary key with its unit and meaning", "[metrics][units]") {
  const std::string text = readme();
  REQUIRE_FALSE(text.empty());
  for (const MetricDoc& d : summary_docs()) {
    const std::string row = "| `" + d.name + "` | " + d.unit + " | " + d.meaning + " |";
    INFO(row);
    CHECK(text.find(row) != std::string::npos);
  }
}

TEST_CASE("the README names every column of every table", "[metrics][units]") {
  const std::string text = readme();
  for (const TableDoc& t : table_docs()) {
    const size_t at = text.find("\n/" + t.group + " ");
    INFO("/" << t.group);
    REQUIRE(at != std::string::npos);
    // The group's entry runs to the next line that starts another group.
    const size_t end = text.find("\n/", at + 1);
    const std::string entry = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    for (const MetricDoc& c : t.columns) {
      INFO(c.name);
      CHECK(entry.find(c.name) != std::string::npos);
    }
  }
}
