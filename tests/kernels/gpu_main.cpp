// Entry point of the GPU tests: without a GPU it prints a visible skip
// message with the runtime's error and returns 77, which ctest
// (SKIP_RETURN_CODE 77) reports as Skipped; with a GPU the runtime cannot use
// it fails (kernels/common/device_probe.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "kernels/common/device_probe.h"

int main(int argc, char** argv) {
  if (const int rc = testbed::cuda_device_gate("gpu_test_kernels")) return rc;
  const int failed = Catch::Session().run(argc, argv);
  return failed == 0 ? 0 : 1;  // never 77 by accident (77 failed tests)
}
