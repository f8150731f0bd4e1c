// Running the testbed executable as a user does, for the CLI tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/scratch.h"

namespace testbed_test {

struct Outcome {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// `testbed ARGS` from the source root (or from `cwd`); "--timeout-wrapper ARGS"
// runs it under `timeout 30`, for commands that must not hang.
inline Outcome run_cli(std::string args, const std::string& cwd = "") {
  std::string prefix;
  const std::string wrapper = "--timeout-wrapper ";
  if (args.compare(0, wrapper.size(), wrapper) == 0) {
    prefix = "timeout 30 ";
    args = args.substr(wrapper.size());
  }
  const std::string cd = cwd.empty() ? std::string() : "cd '" + cwd + "' && ";
  const std::string cmd = cd + prefix + std::string(TESTBED_BINARY_DIR) + "/testbed " + args + " 2>&1";
  Outcome o;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.output.append(buf, n);
  const int raw = pclose(p);
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return o;
}

// Sets an environment variable for the children a test starts (each ctest
// test is a process of its own), and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace testbed_test
