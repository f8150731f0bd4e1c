// A progress line on stderr for long runs ("412/1000 requests  12.3 s  eta 17.5 s"),
// redrawn at most five times a second, and only when stderr is a terminal
// (or driver.progress = on), so logs and pipes stay clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace testbed {

class ProgressPrinter {
 public:
  explicit ProgressPrinter(const std::string& mode);  // auto | on | off
  void update(int64_t finished, int64_t total);
  void done();  // ends the line

 private:
  bool enabled_;
  bool printed_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace testbed
