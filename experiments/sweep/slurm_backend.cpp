// The slurm backend: one sbatch job array per batch of points. Each array task
// runs its point through `testbed run` (nothing in between: the task's line of
// a points file names the point); `sbatch --wait` blocks until every task has
// ended, and the sweep reads the points' results files as for a local run.
//
// What a cluster needs: the testbed executable, the sweep's output directory,
// the working directory and every file a config names (model, trace) on a
// filesystem that every node mounts at the same path; the executable's shared
// libraries (HDF5, Boost.Program_options) installed on the nodes.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/common/params.h"
#include "experiments/sweep/sweep_backend.h"

namespace testbed {
namespace {

namespace fs = std::filesystem;

struct SlurmParams : ParamsOf<SlurmParams> {
  std::string partition;          // empty: the cluster's default partition
  std::string time = "01:00:00";  // per task
  int cpus_per_task = 1;
  std::string mem = "4G";         // per task
  int max_parallel = 0;           // tasks running at once (--array=...%M); 0: no limit
  std::string account, qos;
  std::string options;            // more sbatch options, space-separated (--constraint=h100 --exclusive)
  std::string sbatch = "sbatch";  // the sbatch command
  int max_array_size = 1000;      // most tasks in one array (Slurm's MaxArraySize is 1001 by default)
  int points_per_task = 1;        // points one array task runs one after another (tiny points: Slurm's
                                  // per-task launch cost, about a second, dwarfs them)
  void bind(OptionTable& t) override {
    t.add("slurm.partition", &partition, "partition of the array tasks (empty: the cluster's default)");
    t.add("slurm.time", &time, "time limit per task ([D-]HH:MM:SS or minutes)");
    t.add("slurm.cpus_per_task", &cpus_per_task, "CPUs per task");
    t.add("slurm.mem", &mem, "memory per task (e.g. 4G, 500M)");
    t.add("slurm.max_parallel", &max_parallel, "most tasks running at once (0: no limit)");
    t.add("slurm.account", &account, "account to charge (empty: the default)");
    t.add("slurm.qos", &qos, "quality of service (empty: the default)");
    t.add("slurm.options", &options, "more sbatch options, space-separated (each --name or --name=value)");
    t.add("slurm.sbatch", &sbatch, "the sbatch command");
    t.add("slurm.max_array_size", &max_array_size, "most tasks in one job array (the cluster's MaxArraySize - 1)");
    t.add("slurm.points_per_task", &points_per_task, "points each array task runs in turn (for many small points)");
  }
  void validate() const override {
    require(cpus_per_task >= 1, "slurm.cpus_per_task", "must be >= 1");
    require(max_parallel >= 0, "slurm.max_parallel", "must be >= 0");
    require(max_array_size >= 1, "slurm.max_array_size", "must be >= 1");
    require(points_per_task >= 1, "slurm.points_per_task", "must be >= 1");
    require(!time.empty() && time.find_first_not_of("0123456789:-") == std::string::npos, "slurm.time",
            "'" + time + "' is not a Slurm time ([D-]HH:MM:SS or minutes)");
    const size_t digits = mem.find_first_not_of("0123456789");
    require(!mem.empty() && digits != 0 && (digits == std::string::npos ||
                                            (digits + 1 == mem.size() && std::string("KMGT").find(mem.back()) !=
                                                                             std::string::npos)),
            "slurm.mem", "'" + mem + "' is not a Slurm memory size (a number with K, M, G or T)");
    std::istringstream words(options);
    for (std::string w; words >> w;)
      require(w.rfind("--", 0) == 0, "slurm.options", "'" + w + "' is not an sbatch option (--name or --name=value)");
    for (const std::string* s : {&partition, &account, &qos})
      require(s->find_first_of(" \t\n'\"") == std::string::npos, "slurm.partition",
              "names may not contain spaces or quotes");
    require(!sbatch.empty(), "slurm.sbatch", "must name the sbatch command");
  }
};

// 'text' quoted for bash.
std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Spawned {
  int exit_code = -1;
  std::string output;
};

class SlurmBackend : public SweepBackend {
 public:
  SlurmBackend(const SlurmParams& p, const BackendSetup& setup) : p_(p), setup_(setup) {}

  std::vector<TaskResult> run(const std::vector<PointTask>& tasks, SweepProgress& progress) override {
    std::vector<TaskResult> results(tasks.size());
    if (tasks.empty()) return results;
    for (const std::string* path : {&setup_.work_dir, &setup_.sweep_dir, &setup_.testbed})
      if (path->find_first_of(" \t\n'\"%") != std::string::npos)
        throw ConfigError("slurm backend: '" + *path + "' holds a space, quote or %; sbatch options cannot name it");
    const fs::path dir = fs::path(setup_.sweep_dir) / "slurm";
    fs::create_directories(dir);
    int array = 0;
    while (fs::exists(dir / ("array-" + std::to_string(array) + ".sbatch"))) ++array;
    // One job array per max_array_size tasks (Slurm's MaxArraySize), all submitted at once.
    struct Submission {
      pid_t pid;
      fs::path script, log;
    };
    std::vector<Submission> submitted;
    const size_t per_array = static_cast<size_t>(p_.max_array_size) * p_.points_per_task;
    for (size_t first = 0; first < tasks.size(); first += per_array, ++array) {
      const size_t n = std::min(tasks.size() - first, per_array);
      const std::string name = "array-" + std::to_string(array);
      {
        std::ofstream ids(dir / (name + ".points"));
        for (size_t i = first; i < first + n; ++i) ids << tasks[i].id << "\n";
      }
      Submission s{-1, dir / (name + ".sbatch"), dir / (name + ".submit.log")};
      write_script(s.script, dir / (name + ".points"), dir, name, n);
      // sbatch --wait returns when every task of the array has ended (non-zero when any failed).
      s.pid = spawn_logged({p_.sbatch, "--parsable", "--wait", s.script.string()}, s.log.string());
      if (s.pid < 0) throw std::runtime_error("slurm backend: cannot run '" + p_.sbatch + "'");
      submitted.push_back(s);
    }
    std::vector<int> status(submitted.size(), -1);
    for (size_t left = submitted.size(); left > 0;) {
      for (size_t i = 0; i < submitted.size(); ++i) {
        int st = 0;
        if (status[i] == -1 && waitpid(submitted[i].pid, &st, WNOHANG) == submitted[i].pid) {
          status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          --left;
        }
      }
      int ok = 0;
      for (const PointTask& t : tasks) ok += results_present(t) ? 1 : 0;
      progress.set_finished(ok, 0);
      if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    for (size_t i = 0; i < submitted.size(); ++i) {
      std::ifstream log(submitted[i].log);
      std::stringstream text;
      text << log.rdbuf();
      const std::string out = text.str();
      // --parsable prints "JOBID[;CLUSTER]" first; no job id means the submission itself failed.
      if (out.empty() || !std::isdigit(static_cast<unsigned char>(out[0])))
        throw std::runtime_error("slurm backend: sbatch " + submitted[i].script.string() + " failed (exit " +
                                 std::to_string(status[i]) + "): " + out);
    }
    int ok = 0, failed = 0;
    for (const PointTask& t : tasks) (results_present(t) ? ok : failed) += 1;
    progress.set_finished(ok, failed);
    return results;  // the tasks' exit codes stay in Slurm; its logs are in DIR/slurm/
  }

 private:
  // The array script for `n` points: task i runs lines i*K+1 .. i*K+K of the
  // points file (K = points_per_task), each as its point's `testbed run`.
  void write_script(const fs::path& script, const fs::path& points, const fs::path& dir, const std::string& name,
                    size_t n) const {
    const size_t k = static_cast<size_t>(p_.points_per_task);
    const size_t num_tasks = (n + k - 1) / k;
    std::ofstream s(script);
    s << "#!/bin/bash\n"
         "# Written by testbed sweep: array task i runs the points on lines i*"
      << k << "+1 .. i*" << k << "+" << k << " of " << points.filename().string()
      << ",\n# each as its own `testbed run`.\n"
         "#SBATCH --job-name=testbed-sweep\n"
         "#SBATCH --array=0-"
      << num_tasks - 1 << (p_.max_parallel > 0 ? "%" + std::to_string(p_.max_parallel) : "") << "\n"
      << "#SBATCH --chdir=" << setup_.work_dir << "\n"
      << "#SBATCH --output=" << (dir / (name + "-%a.out")).string() << "\n"
      << "#SBATCH --time=" << p_.time << "\n"
      << "#SBATCH --cpus-per-task=" << p_.cpus_per_task << "\n"
      << "#SBATCH --mem=" << p_.mem << "\n";
    if (!p_.partition.empty()) s << "#SBATCH --partition=" << p_.partition << "\n";
    if (!p_.account.empty()) s << "#SBATCH --account=" << p_.account << "\n";
    if (!p_.qos.empty()) s << "#SBATCH --qos=" << p_.qos << "\n";
    std::istringstream words(p_.options);
    for (std::string w; words >> w;) s << "#SBATCH " << w << "\n";
    const std::string run = quote(setup_.testbed) + " run \"$dir/point.ini\" --output \"$dir\" --overwrite >\"$dir/log.txt\" 2>&1";
    const std::string points_dir = quote(setup_.sweep_dir + "/points");
    s << "set -eu\n";
    if (k == 1) {
      s << "id=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" " << quote(points.string()) << ")\n"
        << "dir=" << points_dir << "/$id\n"
        << "exec " << run << "\n";
    } else {
      s << "first=$((SLURM_ARRAY_TASK_ID * " << k << " + 1))\n"
        << "status=0\n"
        << "for id in $(sed -n \"${first},$((first + " << k - 1 << "))p\" " << quote(points.string()) << "); do\n"
        << "  dir=" << points_dir << "/$id\n"
        << "  " << run << " || status=1\n"
        << "done\n"
        << "exit $status\n";
    }
    if (!s) throw std::runtime_error(script.string() + ": cannot write");
  }

  SlurmParams p_;
  BackendSetup setup_;
};

}  // namespace

TESTBED_REGISTER(SweepBackendRegistry, "slurm", [](const SlurmParams& p, const BackendSetup& s) {
  return std::make_unique<SlurmBackend>(p, s);
});

}  // namespace testbed
