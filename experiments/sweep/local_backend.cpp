// The local backend: up to --jobs point processes at once on this machine,
// each `testbed run` with its output in the point's log.txt.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>

#include "experiments/sweep/sweep_backend.h"

extern char** environ;

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
  // Starts one point with stdout and stderr in its log.txt; -1 when it cannot start.
  pid_t spawn(const PointTask& task, const sigset_t& child_mask) const {
    const std::vector<std::string> args = point_command(setup_, task);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::string log = task.dir + "/log.txt";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &child_mask);  // the child does not inherit the blocked SIGCHLD
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return rc == 0 ? pid : -1;
  }

  BackendSetup setup_;
};

}  // namespace

TESTBED_REGISTER(SweepBackendRegistry, "local",
                 [](const BackendSetup& s) { return std::make_unique<LocalBackend>(s); });

}  // namespace testbed
