#include "engine/executor.h"

#include <stdexcept>

#include "engine/common/config_error.h"
#include "engine/cuda_module.h"

namespace testbed {

void Executor::write_kv_blocks(const std::vector<int32_t>& blocks, const KvBlockData& data) {
  if (!data.bytes.empty() || data.num_blocks != static_cast<int>(blocks.size()))
    throw std::logic_error("executor " + name() + ": holds no KV contents to write");
}

#ifndef TESTBED_HAVE_CUDA
// A build without nvcc has no CUDA executor; say so instead of "unknown".
TESTBED_REGISTER(ExecutorRegistry, "cuda", [](const ExecutorSetup&) -> std::unique_ptr<Executor> {
  throw ConfigError("executor.kind: 'cuda' needs a build with CUDA (nvcc was not found at build time)");
});
#else
// A CUDA build keeps the CUDA executor, the CUDA runtime and cuBLAS in
// libtestbed_cuda.so, loaded only when a run chooses it (engine/cuda_module.h).
TESTBED_REGISTER(ExecutorRegistry, "cuda", [](const ExecutorSetup& s) -> std::unique_ptr<Executor> {
  return cuda_entry_points("executor.kind").make_executor(s);
});
#endif

}  // namespace testbed
