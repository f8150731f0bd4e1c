// The local backend: up to --jobs point processes at once on this machine,
// each `testbed run` with its output in the point's log.txt.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <stdexcept>

#include "experiments/sweep/sweep_backend.h"

namespace testbed {
namespace {

class LocalBackend : public SweepBackend {
 public:
  explicit LocalBackend(const BackendSetup& setup) : setup_(setup) {
    if (setup_.jobs < 1) throw std::logic_error("LocalBackend: jobs must be >= 1");
  }

  std::vector<TaskResult> run(const std::vector<PointTask>& tasks, SweepProgress& progress) override {
    using Clock = std::chrono::steady_clock;
    std::vector<TaskResult> results(tasks.size());
    std::vector<Clock::time_point> started(tasks.size());
    // SIGCHLD is blocked and waited for, so a child's end wakes the loop at once.
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    std::map<pid_t, size_t> running;
    size_t next = 0;
    while (next < tasks.size() || !running.empty()) {
      while (running.size() < static_cast<size_t>(setup_.jobs) && next < tasks.size()) {
        started[next] = Clock::now();
        const pid_t pid = spawn(tasks[next], old);
        if (pid < 0) {
          results[next] = {true, 127, 0.0};
          progress.finished(false);
        } else {
          running[pid] = next;
        }
        ++next;
      }
      bool reaped = false;
      int status = 0;
      pid_t pid;
      while (!running.empty() && (pid = waitpid(-1, &status, WNOHANG)) > 0) {
        const auto it = running.find(pid);
        if (it == running.end()) continue;
        const size_t i = it->second;
        running.erase(it);
        TaskResult& r = results[i];
        r.known = true;
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        r.wall_s = std::chrono::duration<double>(Clock::now() - started[i]).count();
        progress.finished(r.exit_code == 0 && results_present(tasks[i]));
        reaped = true;
      }
      if (!reaped && !running.empty()) {
        timespec wait{0, 200 * 1000 * 1000};
        sigtimedwait(&chld, nullptr, &wait);
        progress.tick();
      }
    }
    sigprocmask(SIG_SETMASK, &old, nullptr);
    return results;
  }

 private:
  // Starts one point with stdout and stderr in its log.txt (the child does not
  // inherit the blocked SIGCHLD); -1 when it cannot start.
  pid_t spawn(const PointTask& task, const sigset_t& child_mask) const {
    return spawn_logged(point_command(setup_, task), task.dir + "/log.txt", &child_mask);
  }

  BackendSetup setup_;
};

}  // namespace

TESTBED_REGISTER(SweepBackendRegistry, "local",
                 [](const BackendSetup& s) { return std::make_unique<LocalBackend>(s); });

}  // namespace testbed
