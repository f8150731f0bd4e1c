#include "experiments/cli/progress_printer.h"

#include <unistd.h>

#include <cstdio>

namespace testbed {

ProgressPrinter::ProgressPrinter(const std::string& mode)
    : enabled_(mode == "on" || (mode == "auto" && isatty(fileno(stderr)))),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void ProgressPrinter::update(int64_t finished, int64_t total) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (printed_ && now - last_ < std::chrono::milliseconds(200) && finished < total) return;
  last_ = now;
  printed_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = finished > 0 && total > finished ? elapsed * (total - finished) / finished : 0.0;
  std::fprintf(stderr, "\r  %lld/%lld requests finished  elapsed %.1f s  eta %.1f s   ",
               static_cast<long long>(finished), static_cast<long long>(total), elapsed, eta);
  std::fflush(stderr);
}

void ProgressPrinter::done() {
  if (enabled_ && printed_) std::fprintf(stderr, "\n");
  printed_ = false;
}

}  // namespace testbed
