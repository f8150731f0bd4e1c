// RequestSource: a stream of requests in arrival order (a trace reader or a
// generator). Pulled lazily, so a million-request trace is never held in memory.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/request.h"

namespace testbed {

class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The next request (arrival_s non-decreasing), or nothing when exhausted.
  virtual std::optional<Request> next() = 0;
  // Total number of requests when known in advance, else -1 (progress display).
  virtual int64_t size_hint() const { return -1; }
  // One bounded piece of work done ahead of next() by a thread that would
  // otherwise wait (a fleet's idle worker: sim/fleet_windows.cpp); true when
  // something was done. Safe to call from any thread, concurrently with
  // next(); what next() returns does not depend on it. Default: nothing.
  virtual bool work_ahead() { return false; }
};

}  // namespace testbed
