#include "experiments/cli/huge_pages.h"

#include <gnu/libc-version.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "engine/common/config_error.h"

namespace testbed {

// 256 MiB of heap growth at a time: in a measured 64-instance fleet the heap
// was then 97% on huge pages, against 25% with glibc's default.
const char* const kHugePageTunables = "glibc.malloc.hugetlb=1:glibc.malloc.top_pad=268435456";

namespace {

// Set only across the exec: "-" when GLIBC_TUNABLES was unset, else "=" and its value.
constexpr const char* kMarker = "TESTBED_HUGE_PAGES_EXEC";

std::string& state() {
  static std::string s = "off";
  return s;
}

bool user_sets_tunables() {
  const char* t = std::getenv("GLIBC_TUNABLES");
  return t && (std::strstr(t, "glibc.malloc.hugetlb") || std::strstr(t, "glibc.malloc.top_pad"));
}

// This process's arguments, as the kernel keeps them (NUL-separated).
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size();) {
    const size_t end = all.find('\0', at);
    args.push_back(all.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return args;
}

}  // namespace

void restore_environment_after_huge_pages_exec() {
  const char* m = std::getenv(kMarker);
  if (!m) {
    if (user_sets_tunables()) state() = "environment";
    return;
  }
  if (m[0] == '=')
    setenv("GLIBC_TUNABLES", m + 1, 1);
  else
    unsetenv("GLIBC_TUNABLES");
  unsetenv(kMarker);
  state() = "on";
}

std::string huge_pages_state() { return state(); }

std::string huge_pages_unavailable_reason() {
  int major = 0, minor = 0;
  if (std::sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor) != 2 || major < 2 || (major == 2 && minor < 35))
    return std::string("glibc ") + gnu_get_libc_version() + " has no glibc.malloc.hugetlb tunable (2.35 or later has)";
  const char* path = "/sys/kernel/mm/transparent_hugepage/enabled";
  std::ifstream in(path);
  std::string mode;
  std::getline(in, mode);
  if (!in && mode.empty()) return std::string("the kernel offers no transparent huge pages (") + path + " is not readable)";
  if (mode.find("[always]") == std::string::npos && mode.find("[madvise]") == std::string::npos)
    return std::string("the kernel's transparent huge pages are off (") + path + ": " + mode + ")";
  return "";
}

void apply_huge_pages(const std::string& setting, bool simulated) {
  if (setting == "off" || state() != "off") return;  // "on" or "environment": settled at start
  if (setting == "auto" && !simulated) return;
  if (user_sets_tunables()) {
    state() = "environment";
    return;
  }
  const std::string why = huge_pages_unavailable_reason();
  if (!why.empty()) {
    if (setting == "on") throw ConfigError("driver.huge_pages: on, but " + why + " (auto or off runs without them)");
    return;
  }
  const char* old = std::getenv("GLIBC_TUNABLES");
  const std::string marker = old ? std::string("=") + old : std::string("-");
  const std::string tunables = old && *old ? std::string(old) + ":" + kHugePageTunables : kHugePageTunables;
  std::vector<std::string> args = own_arguments();
  if (args.empty()) throw std::runtime_error("driver.huge_pages: /proc/self/cmdline is not readable");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  setenv(kMarker, marker.c_str(), 1);
  setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
  std::fflush(stdout);
  std::fflush(stderr);
  execv("/proc/self/exe", argv.data());
  // Only reached when the exec failed: put everything back before saying so.
  const int err = errno;
  unsetenv(kMarker);
  if (old)
    setenv("GLIBC_TUNABLES", marker.c_str() + 1, 1);
  else
    unsetenv("GLIBC_TUNABLES");
  throw std::runtime_error(std::string("driver.huge_pages: executing /proc/self/exe again failed: ") + std::strerror(err) +
                           " (driver.huge_pages = off runs without huge pages)");
}

}  // namespace testbed
