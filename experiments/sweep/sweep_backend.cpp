#include "experiments/sweep/sweep_backend.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

extern char** environ;

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
  return {setup.testbed, "run", task.config, "--output", task.dir, "--overwrite"};  // the sweep owns the point's directory
}

pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log, const sigset_t* child_mask) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (child_mask) {
    posix_spawnattr_setsigmask(&attr, child_mask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  }
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -1;
}

bool results_present(const PointTask& task) {
  return std::filesystem::is_regular_file(std::filesystem::path(task.dir) / "results.h5");
}

}  // namespace testbed
