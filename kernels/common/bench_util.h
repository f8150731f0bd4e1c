// Helpers of the kernel benchmarks (Google Benchmark drivers in kernels/*/):
// CUDA-event timing with the L2 flushed before every timed launch, the
// device-to-device copy bandwidth the memory-bound kernels are judged
// against, and a CSV profile writer (tables a simulator cost model can read).
#pragma once

#include <cuda_runtime_api.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "kernels/common/device_buffer.h"
#include "kernels/common/device_probe.h"

namespace testbed::bench {

// False, with "SKIP: no CUDA device" printed, when there is no device (the drivers then return 77).

class GpuTimer {
 public:
  GpuTimer() {
    int device = 0;
    cuda_check(cudaGetDevice(&device), "cudaGetDevice");
    cuda_check(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device), "SM count");
    int l2 = 0;
    cuda_check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 size");
    // Twice the L2: writing it evicts whatever the previous launch left there,
    // so every timed launch reads its inputs from HBM, as in a real step.
    flush_.resize(2 * static_cast<size_t>(l2 > 0 ? l2 : (64 << 20)));
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    cuda_check(cudaEventCreate(&start_), "event");
    cuda_check(cudaEventCreate(&stop_), "event");
  }
  ~GpuTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  cudaStream_t stream() const { return stream_; }
  int num_sms() const { return num_sms_; }

  // Seconds of one call of `launch` (which enqueues on stream()), L2 cold.
  template <class Launch>
  double time(Launch&& launch) {
    cuda_check(cudaMemsetAsync(flush_.get(), 0, flush_.bytes(), stream_), "L2 flush");
    cuda_check(cudaEventRecord(start_, stream_), "event");
    cuda_check(launch(), "timed launch");
    cuda_check(cudaEventRecord(stop_, stream_), "event");
    cuda_check(cudaEventSynchronize(stop_), "event sync");
    float ms = 0.0f;
    cuda_check(cudaEventElapsedTime(&ms, start_, stop_), "elapsed");
    return ms * 1e-3;
  }

  // Runs the benchmark loop with manual time; returns the mean seconds per call
  // (0 after a CUDA error, which skips the benchmark with its message).
  template <class Launch>
  double run(benchmark::State& state, Launch&& launch) {
    double total = 0.0;
    int64_t n = 0;
    try {
      cuda_check(launch(), "warm-up launch");  // module load, smem attribute, cuBLAS heuristics
      cuda_check(cudaStreamSynchronize(stream_), "warm-up");
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return 0.0;
    }
    for (auto _ : state) {
      try {
        const double s = time(launch);
        state.SetIterationTime(s);
        total += s;
        ++n;
      } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        break;
      }
    }
    return n > 0 ? total / n : 0.0;
  }

  // The copy bandwidth the memory-bound kernels are judged against, printed (1 GiB, best of 5).
  double report_copy_bandwidth() {
    const double bps = copy_bandwidth(size_t(1) << 30, 5);
    std::printf("device-to-device copy bandwidth: %.1f GB/s (1 GiB, best of 5)\n", bps * 1e-9);
    return bps;
  }

  // Device-to-device cudaMemcpy bandwidth in bytes/s (read + write counted).
  double copy_bandwidth(size_t bytes, int reps) {
    DeviceBuffer a(bytes), b(bytes);
    cuda_check(cudaMemsetAsync(a.get(), 1, bytes, stream_), "memset");
    double best = 0.0;
    for (int r = 0; r < reps; ++r) {
      const double s = time([&] { return cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream_); });
      if (s > 0.0 && 2.0 * bytes / s > best) best = 2.0 * bytes / s;
    }
    return best;
  }

 private:
  int num_sms_ = 1;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  DeviceBuffer flush_;
};

// Rows of one CSV table keyed by benchmark name: Google Benchmark calls a
// benchmark several times while it sizes the iteration count, and the last
// (longest) run overwrites the earlier ones. With stream_to(path) the file is
// rewritten after every row, so a run stopped by a time limit keeps the rows
// that finished.
class ProfileTable {
 public:
  explicit ProfileTable(std::string header) : header_(std::move(header)) {}
  void stream_to(std::string path) { path_ = std::move(path); }
  void set(const std::string& key, const std::string& row) {
    rows_[key] = row;
    if (!path_.empty()) write(path_);
  }
  bool empty() const { return rows_.empty(); }
  const std::map<std::string, std::string>& rows() const { return rows_; }
  bool write(const std::string& path) const {
    std::ofstream f(path);
    if (!f) return false;
    f << header_ << "\n";
    for (const auto& [key, row] : rows_) f << row << "\n";
    return static_cast<bool>(f);
  }

 private:
  std::string header_, path_;
  std::map<std::string, std::string> rows_;
};

// The start of a benchmark driver's main(): takes --profile_dir=DIR out of
// argv (default "."), checks for a usable GPU (0, or the exit code: 77 none,
// 1 unusable) and hands the rest of argv to Google Benchmark (1 when it does
// not know an argument).
inline int start_benchmarks(const char* who, int& argc, char** argv, std::string& profile_dir) {
  profile_dir = ".";
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--profile_dir=", 14) == 0)
      profile_dir = argv[i] + 14;
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  if (const int rc = cuda_device_gate(who)) return rc;
  benchmark::Initialize(&argc, argv);
  return benchmark::ReportUnrecognizedArguments(argc, argv) ? 1 : 0;
}

// printf into a std::string (CSV rows).
template <class... Args>
std::string format(const char* fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

}  // namespace testbed::bench
