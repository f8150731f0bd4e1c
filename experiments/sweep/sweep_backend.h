// Where the points of a sweep run. A backend takes a list of point tasks and
// returns when each has finished or failed; the sweep decides success from the
// point's results file, so a backend never needs to parse one. Backends
// register by name (`testbed sweep --backend NAME`) and bind their own keys
// (the [slurm] section of a sweep file is the slurm backend's).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "engine/common/registry.h"

namespace testbed {

// One point to run: `testbed run CONFIG --output DIR` (its progress line is off: not a terminal),
// its stdout and stderr into DIR/log.txt, from the sweep's working directory.
struct PointTask {
  std::string id;
  std::string dir;     // absolute
  std::string config;  // absolute: DIR/point.ini
};

struct TaskResult {
  bool known = false;  // whether the backend saw the process end (local: always)
  int exit_code = -1;  // when known: the exit status, or 128 + signal
  double wall_s = 0;   // when known: from start to exit
};

struct BackendSetup {
  std::string testbed;   // absolute path of the testbed executable
  std::string work_dir;  // absolute: where points run (relative paths in configs are from here)
  std::string sweep_dir; // absolute: the sweep's output directory
  int jobs = 1;          // local: processes at once
};

// Progress on stderr while a sweep runs ("37/100 points  1 failed  12.3 s  eta 20.4 s"),
// only on a terminal; redrawn at most five times a second.
class SweepProgress {
 public:
  SweepProgress(int total, int done_before);
  void finished(bool ok);  // one more point ended
  void set_finished(int ok, int failed);  // absolute counts (backends that poll)
  void tick();             // redraw if due
  void end();              // ends the line
  int failed() const { return failed_; }

 private:
  void draw(bool force);
  bool enabled_;
  int total_, done_before_, ok_ = 0, failed_ = 0;
  bool printed_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

class SweepBackend {
 public:
  virtual ~SweepBackend() = default;
  // Runs every task to its end; results in the order of `tasks`.
  virtual std::vector<TaskResult> run(const std::vector<PointTask>& tasks, SweepProgress& progress) = 0;
};

using SweepBackendRegistry = Registry<SweepBackend, const BackendSetup&>;

// The argument vector of one point's `testbed run`.
std::vector<std::string> point_command(const BackendSetup& setup, const PointTask& task);

// Starts `args` (args[0] looked up on PATH) with stdout and stderr into `log`
// (truncated), the child's signal mask reset to `child_mask` when given.
// Returns the child's pid, or -1 when it cannot start.
pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log, const sigset_t* child_mask = nullptr);

// Whether DIR/results.h5 of a task exists (a run writes it last).
bool results_present(const PointTask& task);

}  // namespace testbed
