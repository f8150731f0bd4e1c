// Helpers of the GPU tests (gpu_test_*.cpp): uploads in a kernel's dtype,
// outputs poisoned with NaN bytes before each launch, and one macro that runs
// the shared validation helper and prints its report on failure.
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/common/device_buffer.h"
#include "validate.h"

namespace testbed::test {

inline DeviceBuffer upload_as(const std::vector<float>& v, DType dtype) {
  DeviceBuffer b;
  if (dtype == DType::kFP32)
    b.upload(v);
  else
    b.upload(to_half_bits(v, dtype));
  return b;
}

inline std::vector<float> download_as(const DeviceBuffer& b, size_t n, DType dtype) {
  if (dtype == DType::kFP32) return b.download<float>(n);
  return from_half_bits(b.download<uint16_t>(n), dtype);
}

inline DeviceBuffer upload_ints(const std::vector<int32_t>& v) {
  DeviceBuffer b;
  b.upload(v);
  return b;
}

// All-ones bytes are NaN in fp32, bf16 and fp16 alike: an element the kernel
// does not write stays NaN and fails validation.
inline DeviceBuffer poisoned(size_t count, DType dtype) {
  DeviceBuffer b(count * dtype_bytes(dtype));
  cuda_check(cudaMemset(b.get(), 0xFF, count * dtype_bytes(dtype)), "poison");
  return b;
}

// The launch returned success and the kernel ran to completion without a fault.
#define REQUIRE_LAUNCH(expr)                              \
  do {                                                    \
    const cudaError_t launch_err_ = (expr);               \
    INFO(#expr << ": " << cudaGetErrorString(launch_err_)); \
    REQUIRE(launch_err_ == cudaSuccess);                  \
    const cudaError_t sync_err_ = cudaDeviceSynchronize(); \
    INFO("after " #expr ": " << cudaGetErrorString(sync_err_)); \
    REQUIRE(sync_err_ == cudaSuccess);                    \
  } while (0)

#define CHECK_VALID(result)       \
  do {                            \
    const auto& valid_ = (result); \
    INFO(valid_.report);          \
    CHECK(valid_.ok);             \
  } while (0)

}  // namespace testbed::test
