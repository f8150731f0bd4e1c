// A fuzz harness: one reader fed arbitrary bytes. Its contract is the
// project's: malformed input is a ConfigError (exit 2 in the CLI), and
// nothing else may escape, crash, hang, leak or trip a sanitizer.
//
//   FUZZ_TARGET(mooncake) { ... feed data[0, size) to the reader ...; return 0; }
//
// Built with TESTBED_FUZZ (clang), each harness file is a libFuzzer binary of
// its own (fuzz_<name>); in every build, all of them are linked into one
// fuzz_replay binary that runs the seed corpus and every input fuzzing ever
// found (tests/fuzz/corpus/<name>, tests/fuzz/regressions/<name>) as ctest tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/common/config_error.h"

namespace testbed_fuzz {

using FuzzFn = int (*)(const uint8_t*, size_t);
bool register_target(const char* name, FuzzFn fn);

// Writes the bytes to a file of this process's own and returns its path (the
// readers take paths, as the CLI gives them).
std::string write_input(const uint8_t* data, size_t size, const std::string& suffix);

// Runs `f`, letting the project's input error pass (the reader did its job).
template <class F>
void expect_config_error_only(F&& f) {
  try {
    f();
  } catch (const testbed::ConfigError&) {
  }
}

}  // namespace testbed_fuzz

#ifdef TESTBED_FUZZ_STANDALONE
#define FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#else
#define FUZZ_TARGET(name)                                                                         \
  static int fuzz_##name(const uint8_t* data, size_t size);                                      \
  [[maybe_unused]] static const bool registered_##name = testbed_fuzz::register_target(#name, fuzz_##name); \
  static int fuzz_##name(const uint8_t* data, size_t size)
#endif
