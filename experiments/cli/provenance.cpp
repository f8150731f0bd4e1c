#include "experiments/cli/provenance.h"

#include <unistd.h>

#include <fstream>

#include "engine/metrics/results_file.h"
#include "experiments/cli/huge_pages.h"
#include "testbed_version.h"

namespace testbed {
namespace {

std::string& stored_command_line() {
  static std::string s;
  return s;
}

// Quotes an argument for a shell when it needs it.
std::string shell_word(const std::string& a) {
  if (!a.empty() && a.find_first_of(" \t\n'\"\\$`*?[]{}();&|<>") == std::string::npos) return a;
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown";
}

}  // namespace

void set_command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + shell_word(argv[i]);
  stored_command_line() = s;
}

std::string command_line() { return stored_command_line(); }

std::string build_commit() { return std::string(TESTBED_GIT_COMMIT) + (TESTBED_GIT_DIRTY ? "+dirty" : ""); }

void write_provenance(ResultsFile& file) {
  file.set_attr("run", "commit", std::string(TESTBED_GIT_COMMIT));
  file.set_attr("run", "huge_pages", huge_pages_state());
  file.set_attr("run", "dirty", static_cast<double>(TESTBED_GIT_DIRTY));
  file.set_attr("run", "version", std::string(TESTBED_VERSION));
  file.set_attr("run", "command_line", command_line());
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  file.set_attr("run", "host", std::string(host[0] ? host : "unknown"));
  file.set_attr("run", "cpu", cpu_model());
}

}  // namespace testbed
