// The tests' scratch directories (support/scratch.h) go when the process that
// made them exits, so a ctest run leaves nothing in the temporary directory.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/scratch.h"

namespace fs = std::filesystem;

namespace {

// Runs f in a child process that then exits normally (static destructors
// run); returns what f wrote to the pipe.
template <class F>
std::string in_child(F f) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const std::string out = f();
    const ssize_t n = ::write(fds[1], out.data(), out.size());
    std::exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return out;
}

}  // namespace

TEST_CASE("a scratch directory and its files are removed when its process exits", "[scratch]") {
  const std::string dir = in_child([] {
    const fs::path d = testbed_test::scratch_dir("testbed_scratch_probe", "case");
    std::ofstream(d / "file.txt") << "written";
    return d.parent_path().string();
  });
  REQUIRE_FALSE(dir.empty());
  CHECK(dir.find("testbed_scratch_probe_") != std::string::npos);
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("a forked child's exit leaves its parent's scratch directory alone", "[scratch]") {
  const fs::path root = testbed_test::scratch_root("testbed_scratch_parent");
  std::ofstream(root / "kept.txt") << "kept";
  in_child([] { return std::string("exiting"); });  // the child holds a copy of the parent's list
  CHECK(fs::exists(root / "kept.txt"));
}

TEST_CASE("TESTBED_KEEP_SCRATCH=1 keeps the scratch directory for a look", "[scratch]") {
  const std::string dir = in_child([] {
    ::setenv("TESTBED_KEEP_SCRATCH", "1", 1);
    return testbed_test::scratch_root("testbed_scratch_keep").string();
  });
  CHECK(fs::exists(dir));
  fs::remove_all(dir);
}
