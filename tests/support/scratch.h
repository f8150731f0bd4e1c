// Scratch directories for tests: <tmp>/<suite>_<pid>, removed with everything
// in them when the test process exits, so a run of ctest leaves nothing in
// the temporary directory. TESTBED_KEEP_SCRATCH=1 keeps them, to look at a
// failing test's files.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace testbed_test {

// <tmp>/<suite>_<pid>, created; removed at exit (by the process that made it
// only: a forked child's exit leaves it alone).
inline std::filesystem::path scratch_root(const std::string& suite) {
  namespace fs = std::filesystem;
  struct Roots {
    std::mutex mutex;
    std::vector<std::pair<pid_t, fs::path>> paths;  // the process that made each
    ~Roots() {
      const char* keep = std::getenv("TESTBED_KEEP_SCRATCH");
      if (keep && std::string(keep) == "1") return;
      for (const auto& [pid, p] : paths) {
        if (pid != ::getpid()) continue;
        std::error_code ec;
        fs::remove_all(p, ec);
      }
    }
  };
  static Roots roots;
  const fs::path p = fs::temp_directory_path() / (suite + "_" + std::to_string(::getpid()));
  fs::create_directories(p);
  std::lock_guard<std::mutex> lock(roots.mutex);
  bool known = false;
  for (const auto& entry : roots.paths) known = known || entry.second == p;
  if (!known) roots.paths.emplace_back(::getpid(), p);
  return p;
}

// An empty directory of its own under scratch_root(suite).
inline std::filesystem::path scratch_dir(const std::string& suite, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path p = scratch_root(suite) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

}  // namespace testbed_test
