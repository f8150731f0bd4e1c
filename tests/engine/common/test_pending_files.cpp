// PendingFile: a half-written file is removed when its writer fails, and when
// the process is interrupted (SIGINT, SIGTERM) before it is renamed into place.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "engine/common/pending_files.h"
#include "support/scratch.h"

using namespace testbed;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  return testbed_test::scratch_dir("testbed_pending", name);
}

}  // namespace

TEST_CASE("a pending file is removed unless done, and kept once done", "[pending]") {
  const fs::path d = scratch("scope");
  {
    PendingFile p((d / "a.tmp").string());
    std::ofstream(p.path()) << "half";
  }
  CHECK_FALSE(fs::exists(d / "a.tmp"));
  {
    PendingFile p((d / "b.tmp").string());
    std::ofstream(p.path()) << "whole";
    fs::rename(p.path(), d / "b");
    p.done();
  }
  CHECK(fs::exists(d / "b"));
}

TEST_CASE("a signal removes every pending file and the process dies of it", "[pending]") {
  for (int sig : {SIGINT, SIGTERM}) {
    const fs::path d = scratch("signal" + std::to_string(sig));
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      remove_pending_files_on_signals();
      PendingFile p((d / "results.h5.tmp").string());
      std::ofstream(p.path()) << "half-written";
      std::ofstream(d / "kept") << "not pending";
      std::raise(sig);
      ::_exit(0);  // not reached
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK_FALSE(fs::exists(d / "results.h5.tmp"));
    CHECK(fs::exists(d / "kept"));
  }
}
