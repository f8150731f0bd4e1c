// Wall-clock drivers: they own time for real executors (CPU, CUDA). The
// scheduler only ever sees the `now` they pass in.
//   offline:  every request arrives at t = 0 (throughput benchmarks);
//   realtime: requests are released when the wall clock passes their arrival.
// The simulated driver (sim/) runs the same Engine on simulated time.
#pragma once

#include <cstdint>
#include <functional>

#include "engine/engine.h"
#include "engine/request_source.h"

namespace testbed {

// Called after every step with the requests finished so far.
using ProgressFn = std::function<void(int64_t finished, int64_t total)>;

// Both return the run's duration in seconds (wall clock).
double run_offline(Engine& engine, RequestSource& source, const ProgressFn& progress);
double run_realtime(Engine& engine, RequestSource& source, const ProgressFn& progress);

}  // namespace testbed
