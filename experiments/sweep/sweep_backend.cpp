#include "experiments/sweep/sweep_backend.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace testbed {

SweepProgress::SweepProgress(int total, int done_before)
    : enabled_(isatty(fileno(stderr)) != 0),
      total_(total),
      done_before_(done_before),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void SweepProgress::finished(bool ok) {
  (ok ? ok_ : failed_) += 1;
  draw(false);
}

void SweepProgress::set_finished(int ok, int failed) {
  if (ok == ok_ && failed == failed_) return draw(false);
  ok_ = ok;
  failed_ = failed;
  draw(false);
}

void SweepProgress::tick() { draw(false); }

void SweepProgress::draw(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && printed_ && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  printed_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const int ran = ok_ + failed_, left = total_ - done_before_ - ran;
  char eta[32] = "";
  if (ran > 0 && left > 0) std::snprintf(eta, sizeof eta, "  eta %.1f s", elapsed * left / ran);
  std::fprintf(stderr, "\r  %d/%d points done  %d failed  elapsed %.1f s%s   ", done_before_ + ran, total_, failed_,
               elapsed, eta);
  std::fflush(stderr);
}

void SweepProgress::end() {
  if (enabled_ && printed_) {
    draw(true);
    std::fprintf(stderr, "\n");
  }
  printed_ = false;
}

std::vector<std::string> point_command(const BackendSetup& setup, const PointTask& task) {
  return {setup.testbed, "run", task.config, "--output", task.dir};
}

bool results_present(const PointTask& task) {
  return std::filesystem::is_regular_file(std::filesystem::path(task.dir) / "results.h5");
}

}  // namespace testbed
