// The CUDA code (engine/cuda/, kernels/*/*.cu) as the rest of the program
// reaches it, in a CUDA build. The testbed executable links neither that code
// nor the CUDA runtime nor cuBLAS: they live in a module, libtestbed_cuda.so,
// built beside the executable and loaded the first time the program needs
// them (executor.kind = cuda), so a run that never touches a GPU maps none of
// them. The module leaves the engine's symbols undefined and binds them to the
// executable's (built with ENABLE_EXPORTS): one copy of every registry and
// static. An executable that links the CUDA code in (the GPU tests, the kernel
// benchmarks) gets its entry points from the code's static initialiser and
// loads nothing. A build without CUDA has none of this (engine/executor.cpp).
//
//   TESTBED_CUDA_MODULE=/path/to/libtestbed_cuda.so   loads that file instead
#pragma once

#include <memory>
#include <string>

#include "engine/executor.h"

namespace testbed {

struct CudaEntryPoints {
  // executor.kind = cuda: throws ConfigError when there is no usable device.
  std::unique_ptr<Executor> (*make_executor)(const ExecutorSetup&) = nullptr;
};

// A version and the sizes of the types the entry points pass: a module built
// from another tree (its structs of another shape) is refused, not called.
// Bump the version when an entry point's signature changes.
constexpr unsigned long kCudaEntryAbi =
    (1ul << 48) ^ (sizeof(CudaEntryPoints) << 32) ^ (sizeof(ExecutorSetup) << 16) ^ sizeof(ModelConfig);

// The CUDA code's static initialiser hands over its entry points, compiled
// against `abi` (engine/cuda/cuda_executor.cpp). Runs before main or inside
// cuda_entry_points' dlopen, never on its own thread.
bool provide_cuda_entry_points(const CudaEntryPoints& entry, unsigned long abi);

// The CUDA code's entry points; the first call loads the module unless the
// code is linked in. Throws ConfigError("<key>: cuda: ...") naming the module's
// path and the loader's own error when it cannot be loaded.
const CudaEntryPoints& cuda_entry_points(const std::string& key);

// Where the module is: $TESTBED_CUDA_MODULE when set, else libtestbed_cuda.so
// beside the running executable (/proc/self/exe).
std::string cuda_module_path();

}  // namespace testbed
