// Is there a CUDA device, and if not, why? The GPU tests and benchmarks skip
// (exit 77) only when the machine has no GPU at all. A GPU that nvidia-smi
// lists but the CUDA runtime cannot use (a driver older than the runtime, a
// missing device node) is a failure with the runtime's own error, never a
// silent skip. Header-only host code; needs the CUDA runtime.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

namespace testbed {

struct DeviceProbe {
  int count = 0;
  std::string error;          // the runtime's error string when cudaGetDeviceCount failed
  std::string smi;            // nvidia-smi -L's first line, when it lists a GPU
};

inline DeviceProbe probe_cuda_device() {
  DeviceProbe p;
  const cudaError_t err = cudaGetDeviceCount(&p.count);
  if (err != cudaSuccess) {
    p.error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    p.count = 0;
    cudaGetLastError();  // clear it for later calls
  }
  if (p.count == 0) {
    if (FILE* f = popen("nvidia-smi -L 2>/dev/null", "r")) {
      char line[256];
      if (std::fgets(line, sizeof line, f) && std::string(line).rfind("GPU ", 0) == 0) {
        p.smi = line;
        if (!p.smi.empty() && p.smi.back() == '\n') p.smi.pop_back();
      }
      pclose(f);
    }
  }
  return p;
}

// 0: a device is there, go on; 77: no GPU on this machine (skip); 1: nvidia-smi
// sees a GPU the runtime cannot use (fail). Prints which, naming `who`.
inline int cuda_device_gate(const char* who) {
  const DeviceProbe p = probe_cuda_device();
  if (p.count > 0) return 0;
  if (!p.smi.empty()) {
    std::printf("FAIL: %s: nvidia-smi lists a GPU (%s) but the CUDA runtime sees none (%s)\n", who, p.smi.c_str(),
                p.error.empty() ? "cudaGetDeviceCount returned 0" : p.error.c_str());
    return 1;
  }
  std::printf("SKIP: no CUDA device (%s)\n", p.error.empty() ? "cudaGetDeviceCount returned 0" : p.error.c_str());
  return 77;
}

}  // namespace testbed
