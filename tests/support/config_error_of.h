// The message of the ConfigError a callable throws, for tests of error paths.
#pragma once

#include <string>

#include "engine/common/config_error.h"

namespace testbed_test {

// "" if `f` throws nothing; any other exception propagates and fails the test.
template <class F>
std::string config_error_of(F&& f) {
  try {
    f();
  } catch (const testbed::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace testbed_test
