// Loading the CUDA module on first use (engine/cuda_module.h). CUDA builds only.
#include "engine/cuda_module.h"

#ifdef TESTBED_HAVE_CUDA

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "engine/common/config_error.h"

namespace testbed {
namespace {

// The module's file name; engine/cuda/CMakeLists.txt builds it so.
constexpr const char* kModuleName = "libtestbed_cuda.so";

struct ModuleState {
  std::mutex mutex;  // held by cuda_entry_points, across its dlopen
  bool provided = false;
  CudaEntryPoints entry;
  std::string abi_error;  // a provider compiled against another kCudaEntryAbi
};

ModuleState& module_state() {
  static ModuleState s;  // a function-local static: providers may run before this file's statics
  return s;
}

}  // namespace

bool provide_cuda_entry_points(const CudaEntryPoints& entry, unsigned long abi) {
  // No lock: before main there is one thread, and inside dlopen cuda_entry_points holds it.
  ModuleState& s = module_state();
  if (abi != kCudaEntryAbi || entry.make_executor == nullptr) {
    s.abi_error = "its entry points were compiled against another tree (ABI " + std::to_string(abi) + ", this " +
                  "executable's " + std::to_string(kCudaEntryAbi) + "): rebuild both";
    return false;
  }
  s.entry = entry;
  s.provided = true;
  return true;
}

std::string cuda_module_path() {
  if (const char* env = std::getenv("TESTBED_CUDA_MODULE"); env != nullptr && *env != '\0') return env;
  std::string exe(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", exe.data(), exe.size());
  if (n <= 0 || static_cast<size_t>(n) >= exe.size()) return kModuleName;  // the loader's search path
  exe.resize(static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return (slash == std::string::npos ? std::string() : exe.substr(0, slash + 1)) + kModuleName;
}

const CudaEntryPoints& cuda_entry_points(const std::string& key) {
  ModuleState& s = module_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.provided) return s.entry;
  const std::string path = cuda_module_path();
  if (s.abi_error.empty()) {
    // RTLD_NOW: a symbol the executable does not export fails here, naming it, not in the middle of a run.
    // The module stays loaded for the life of the process (its code is in use); a failed load may be retried.
    if (::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
      const char* why = ::dlerror();
      throw ConfigError(key + ": cuda: cannot load the CUDA module " + path + " (" + (why ? why : "unknown error") +
                        "); it is built beside the testbed executable (libtestbed_cuda.so), or name it with "
                        "TESTBED_CUDA_MODULE");
    }
  }
  if (!s.abi_error.empty()) throw ConfigError(key + ": cuda: the CUDA module " + path + " does not fit: " + s.abi_error);
  if (!s.provided)
    throw ConfigError(key + ": cuda: " + path + " loaded but provided no CUDA entry points (not a libtestbed_cuda.so?)");
  return s.entry;
}

}  // namespace testbed

#endif  // TESTBED_HAVE_CUDA
