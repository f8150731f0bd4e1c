// fuzz_replay NAME DIR...: every file under the DIRs through harness NAME (a
// ctest test per harness: the seed corpus and every input fuzzing found). A
// harness that lets anything but ConfigError escape fails the test; so does a
// sanitizer report in a sanitized build.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace testbed_fuzz {

std::map<std::string, FuzzFn>& targets() {
  static std::map<std::string, FuzzFn> t;
  return t;
}

bool register_target(const char* name, FuzzFn fn) {
  targets()[name] = fn;
  return true;
}

}  // namespace testbed_fuzz

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  auto& targets = testbed_fuzz::targets();
  if (argc < 3 || !targets.count(argv[1])) {
    std::fprintf(stderr, "usage: fuzz_replay NAME DIR... (names:");
    for (const auto& [name, fn] : targets) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, ")\n");
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    if (!fs::is_directory(argv[i])) continue;  // a harness may have no regressions yet
    for (const auto& e : fs::recursive_directory_iterator(argv[i]))
      if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_replay %s: no inputs\n", argv[1]);
    return 1;
  }
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      targets[argv[1]](reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz_replay %s: %s: escaped the error path: %.300s\n", argv[1], f.c_str(), e.what());
      return 1;
    } catch (...) {
      std::fprintf(stderr, "fuzz_replay %s: %s: escaped the error path: a non-std exception\n", argv[1], f.c_str());
      return 1;
    }
  }
  std::printf("fuzz_replay %s: %zu inputs, each a result or a ConfigError\n", argv[1], files.size());
  return 0;
}
