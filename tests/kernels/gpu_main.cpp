// Entry point of the GPU tests: without a CUDA device it prints a visible skip
// message and returns 77, which ctest (SKIP_RETURN_CODE 77) reports as Skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "engine/cuda/cuda_executor.h"

int main(int argc, char** argv) {
  if (!testbed::cuda_device_available()) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  const int failed = Catch::Session().run(argc, argv);
  return failed == 0 ? 0 : 1;  // never 77 by accident (77 failed tests)
}
