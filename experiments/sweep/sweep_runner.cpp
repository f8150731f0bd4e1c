#include "experiments/sweep/sweep_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "engine/common/choice.h"
#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/metrics/fleet_metrics.h"
#include "engine/metrics/results_file.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "experiments/cli/experiment.h"
#include "experiments/sweep/bisection.h"
#include "experiments/sweep/sweep_backend.h"
#include "experiments/sweep/sweep_file.h"
#include "experiments/sweep/sweep_points.h"
#include "experiments/sweep/sweep_table.h"

namespace testbed {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The metrics a run's /summary has (those of an empty run; a search's metric must be one).
std::set<std::string> summary_metric_names() {
  RunRecorder rec;
  Summary s = summarize(rec, 1, SloConfig{});
  FleetCostFacts facts;  // one priced, powered pool: the cost and energy metrics too
  facts.pools.emplace_back();
  facts.pools.back().price_per_gpu_hour = 1.0;
  facts.pools.back().power_w_per_gpu = 1.0;
  add_fleet_metrics(rec, facts, s);
  std::set<std::string> names;
  for (const auto& [name, value] : s.values()) names.insert(name);
  return names;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A point's results, read once: its /summary and the run's own wall time.
struct PointResults {
  std::vector<ResultsAttr> summary;
  double wall_s = 0.0;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether DIR holds a complete run of exactly this point's config: results.h5
// (which a run writes last) readable, with a summary, beside a config.ini equal
// to the point's resolved config. `stale` is set when a results file exists
// but is unreadable or of another config.
bool complete(const SweepPoint& p, const fs::path& dir, PointResults* out, bool* stale = nullptr) {
  const fs::path file = dir / "results.h5";
  if (stale) *stale = false;
  if (!fs::is_regular_file(file)) return false;
  if (read_text(dir / "config.ini") == p.ini) {
    try {
      std::vector<std::vector<ResultsAttr>> groups = read_results_attrs(file.string(), std::vector<std::string>{"summary", "run"});
      if (!groups[0].empty()) {
        out->summary = std::move(groups[0]);
        for (const ResultsAttr& a : groups[1])
          if (a.name == "wall_s" && !a.is_text) out->wall_s = a.number;
        return true;
      }
    } catch (const ConfigError&) {
    }
  }
  if (stale) *stale = true;
  return false;
}

// The sweep file as DIR/sweep.ini keeps it: the same text, its base made
// absolute so that the copy runs from anywhere.
std::string record_of(const std::string& sweep_path, const std::string& base) {
  std::istringstream in(read_text(sweep_path));
  std::string out, line;
  bool replaced = false;
  while (std::getline(in, line)) {
    const size_t a = line.find_first_not_of(" \t");
    if (!replaced && a != std::string::npos && line.compare(a, 4, "base") == 0 &&
        line.find_first_not_of(" \t", a + 4) == line.find('=')) {
      line = "base = " + fs::absolute(base).lexically_normal().string();
      replaced = true;
    }
    out += line + "\n";
  }
  return out;
}

double summary_value(const std::vector<ResultsAttr>& summary, const std::string& name, bool* found) {
  *found = false;
  for (const ResultsAttr& a : summary)
    if (a.name == name && !a.is_text) {
      *found = true;
      return a.number;
    }
  return 0.0;
}

std::string last_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last.empty() ? "(empty log)" : last;
}

// A probed value as text: whole numbers for integer searches, else 12
// significant digits (a midpoint prints as 8.46640625, not 8.466406249999999).
std::string format_probe(double v, bool integer) {
  char buf[32];
  std::snprintf(buf, sizeof buf, integer ? "%.0f" : "%.12g", v);
  double rounded = 0;
  parse_value(buf, rounded);
  return integer ? std::string(buf) : format_value(rounded);
}

// Runs batches of points on the backend, skipping the complete ones, and keeps the counts.
class BatchRunner {
 public:
  BatchRunner(SweepBackend& backend, fs::path dir) : backend_(backend), dir_(std::move(dir)) {}

  // The rows of `batch`, each ok with its summary or failed.
  std::vector<PointRow> run(const std::vector<const SweepPoint*>& batch) {
    std::vector<PointRow> rows(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) rows[i].point = batch[i];
    std::vector<PointTask> tasks;
    std::vector<size_t> task_of;
    for (size_t i = 0; i < batch.size(); ++i) {
      const SweepPoint& p = *batch[i];
      const fs::path pdir = dir_ / "points" / p.id;
      bool stale = false;
      PointResults r;
      if (complete(p, pdir, &r, &stale)) {
        rows[i].ok = true;
        rows[i].summary = std::move(r.summary);
        ++done_before;
        continue;
      }
      fs::create_directories(pdir);
      if (stale) {
        fs::remove(pdir / "results.h5");  // another config's or a broken file: this point runs again
        ++num_stale;
      }
      write_text_atomically(pdir / "point.ini", p.ini);
      tasks.push_back({p.id, pdir.string(), (pdir / "point.ini").string()});
      task_of.push_back(i);
    }
    if (tasks.empty()) return rows;
    SweepProgress progress(static_cast<int>(batch.size()), static_cast<int>(batch.size() - tasks.size()));
    const auto t0 = Clock::now();
    const std::vector<TaskResult> results = backend_.run(tasks, progress);
    backend_s += seconds_since(t0);
    progress.end();
    for (size_t t = 0; t < tasks.size(); ++t) {
      const SweepPoint& p = *batch[task_of[t]];
      const fs::path pdir(tasks[t].dir);
      ++ran;
      if (results[t].known) process_s += results[t].wall_s;
      PointResults r;
      if (complete(p, pdir, &r)) {
        rows[task_of[t]].ok = true;
        rows[task_of[t]].summary = std::move(r.summary);
        runs_own_s += r.wall_s;
      } else {
        std::string why = results[t].known ? "exit " + std::to_string(results[t].exit_code) : "no results";
        failures.push_back("  " + p.id + " (" + describe(p.values) + "): " + why + "; " + (pdir / "log.txt").string() +
                           ": " + last_line(pdir / "log.txt"));
      }
    }
    return rows;
  }

  int done_before = 0, ran = 0, num_stale = 0;
  double backend_s = 0, process_s = 0, runs_own_s = 0;
  std::vector<std::string> failures;

 private:
  SweepBackend& backend_;
  fs::path dir_;
};

}  // namespace

int run_sweep(const SweepOptions& opt) {
  const auto t0 = Clock::now();
  const SweepFile sweep = read_sweep_file(opt.sweep_path);

  // The backend and its keys ([slurm] ...), every backend's keys checked whatever runs.
  Choice<SweepBackendRegistry> backend{"sweep.backend", "local", "where the points run"};
  OptionTable backend_table;
  backend.bind(backend_table);
  backend_table.set("sweep.backend", opt.backend, "command line (--backend)");
  for (const SweepEntry& e : sweep.backend_entries) backend_table.set(e.key, e.value, e.origin);
  backend.validate();
  if (opt.jobs_set && opt.backend != "local")
    throw ConfigError("--jobs: is the local backend's number of processes; the slurm backend's limit is "
                      "[slurm] max_parallel");
  const int jobs = opt.jobs_set ? opt.jobs : std::max(1u, std::thread::hardware_concurrency());
  require(jobs >= 1, "--jobs", "must be >= 1");

  SearchParams search;
  if (sweep.has_search) {
    OptionTable t;
    search.bind(t);
    for (const SweepEntry& e : sweep.search_entries) t.set(e.key, e.value, e.origin);
    search.validate();
    for (const SweepAxis& a : sweep.axes)
      require(a.key != search.key, a.origin, search.key + " is both swept and searched");
    const std::set<std::string> metrics = summary_metric_names();
    for (const SearchCondition& c : search.conditions())
      require(metrics.count(c.metric) != 0, "search.metric",
              "unknown metric '" + c.metric + "' (known: " + join(metrics) + ")");
  }

  // Every point resolved and validated before anything is written.
  const PointResolver resolver(sweep, opt.overrides);
  const std::vector<PointValues> grid = expand_grid(sweep);
  std::vector<SweepPoint> grid_points;
  std::map<std::string, std::string> ids;  // id -> canonical values: two different points may not share one
  const auto check_id = [&](const SweepPoint& p) {
    const std::string c = canonical_values(p.values);
    const auto [it, fresh] = ids.emplace(p.id, c);
    if (!fresh && it->second != c) throw std::runtime_error("sweep: two points hash to the id " + p.id);
  };
  for (const PointValues& values : grid) {
    if (!sweep.has_search) {
      grid_points.push_back(resolver.resolve(values));
      check_id(grid_points.back());
      continue;
    }
    // The bracket's ends and a midpoint must be valid configs (a midpoint of an
    // integer key is not, unless the search probes whole numbers).
    const double mid = search.integer ? std::floor((search.low + search.high) / 2) : (search.low + search.high) / 2;
    for (double v : {search.low, search.high, mid}) {
      PointValues probe = values;
      probe.emplace_back(search.key, format_probe(v, search.integer));
      try {
        resolver.resolve(probe);
      } catch (const ConfigError& e) {
        if (v != mid) throw;
        throw ConfigError(std::string(e.what()) + " (a midpoint of the search; search.integer = true probes whole "
                                                  "numbers)");
      }
    }
  }

  // The points' warnings, each once with how many points it concerns (each point's run records its own).
  std::map<std::string, int> warned;
  std::vector<std::string> warning_order;
  for (const SweepPoint& p : grid_points)
    for (const std::string& w : p.warnings)
      if (warned[w]++ == 0) warning_order.push_back(w);
  for (const std::string& w : warning_order)
    std::fprintf(stderr, "testbed sweep: warning (%d of %zu points): %s\n", warned[w], grid_points.size(), w.c_str());

  const std::string dir_text =
      opt.output_dir.empty() ? (fs::path("results") / fs::path(opt.sweep_path).stem()).string() : opt.output_dir;
  if (opt.dry_run) {
    std::printf("testbed sweep %s: %zu point%s%s (base %s, seeds %s); nothing run\n", opt.sweep_path.c_str(),
                grid.size(), grid.size() == 1 ? "" : "s", sweep.has_search ? " to search" : "", sweep.base.c_str(),
                sweep.seeds.c_str());
    for (size_t i = 0; i < grid.size(); ++i) {
      const std::string id = sweep.has_search ? point_id(grid[i]) : grid_points[i].id;
      std::printf("  %s  %s", id.c_str(), describe(grid[i]).c_str());
      if (sweep.has_search)
        std::printf("  (search %s in [%s, %s])", search.key.c_str(), format_value(search.low).c_str(),
                    format_value(search.high).c_str());
      std::printf("\n");
    }
    std::printf("results would go to %s/points/<id>/\n", dir_text.c_str());
    return 0;
  }

  const fs::path dir = fs::absolute(dir_text).lexically_normal();
  fs::create_directories(dir / "points");
  write_text_atomically(dir / "sweep.ini", record_of(opt.sweep_path, sweep.base));
  BackendSetup setup;
  setup.testbed = opt.testbed.empty() ? fs::canonical("/proc/self/exe").string() : opt.testbed;
  setup.work_dir = fs::current_path().string();
  setup.sweep_dir = dir.string();
  setup.jobs = jobs;
  const std::unique_ptr<SweepBackend> runner_backend = backend.create(setup);
  BatchRunner runner(*runner_backend, dir);

  std::printf("testbed sweep %s: %zu %s, backend %s%s\n", opt.sweep_path.c_str(), grid.size(),
              sweep.has_search ? "searches" : (grid.size() == 1 ? "point" : "points"), opt.backend.c_str(),
              opt.backend == "local" ? (", " + std::to_string(jobs) + " jobs").c_str() : "");
  std::fflush(stdout);

  SweepTableInfo info;
  info.sweep_file = opt.sweep_path;
  info.base = sweep.base;
  info.backend = opt.backend;
  info.seeds = sweep.seeds;
  for (const std::string& o : opt.overrides) info.overrides += (info.overrides.empty() ? "" : " ") + o;
  for (const SweepAxis& a : sweep.axes) info.columns.push_back(a.key);
  std::vector<PointRow> rows;
  std::vector<SearchRow> search_rows;
  std::deque<SweepPoint> probes;  // stable addresses for the rows

  if (!sweep.has_search) {
    std::vector<const SweepPoint*> batch;
    for (const SweepPoint& p : grid_points) batch.push_back(&p);
    rows = runner.run(batch);
  } else {
    info.columns.push_back(search.key);
    info.search_key = search.key;
    const std::vector<SearchCondition> conditions = search.conditions();
    std::string condition_text;
    for (const SearchCondition& c : conditions) condition_text += (condition_text.empty() ? "" : " and ") + c.describe();
    info.search_attrs = {{"condition", condition_text},
                         {"metric", search.metric},
                         {"target", search.target},
                         {"direction", search.direction},
                         {"tolerance", format_value(search.resolved_tolerance())}};
    std::vector<Bisection> searches;
    std::vector<bool> failed(grid.size(), false);
    std::vector<std::vector<std::pair<double, PointRow>>> probe_rows(grid.size());
    for (size_t g = 0; g < grid.size(); ++g)
      searches.emplace_back(search.low, search.high, search.resolved_tolerance(), search.integer);
    for (int round = 0;; ++round) {
      std::vector<const SweepPoint*> batch;
      std::vector<std::pair<size_t, double>> owner;  // grid point, probed value
      for (size_t g = 0; g < grid.size(); ++g) {
        if (failed[g]) continue;
        for (double v : searches[g].next()) {
          PointValues values = grid[g];
          values.emplace_back(search.key, format_probe(v, search.integer));
          probes.push_back(resolver.resolve(values));
          check_id(probes.back());
          batch.push_back(&probes.back());
          owner.emplace_back(g, v);
        }
      }
      if (batch.empty()) break;
      std::vector<PointRow> done = runner.run(batch);
      for (size_t i = 0; i < batch.size(); ++i) {
        const auto [g, v] = owner[i];
        const bool ok = done[i].ok;
        bool holds = ok;
        for (const SearchCondition& c : conditions) {
          if (!ok) break;
          bool found = false;
          const double m = summary_value(done[i].summary, c.metric, &found);
          require(found, "search.metric", "the results of point " + batch[i]->id + " have no metric '" + c.metric + "'");
          holds = holds && c.holds(m);
        }
        probe_rows[g].emplace_back(v, std::move(done[i]));
        if (!ok) {
          failed[g] = true;
          continue;
        }
        searches[g].record(v, holds);
      }
    }
    for (size_t g = 0; g < grid.size(); ++g) {
      std::sort(probe_rows[g].begin(), probe_rows[g].end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& [v, row] : probe_rows[g]) rows.push_back(std::move(row));
      SearchRow s;
      s.values = grid[g];
      s.id = point_id(grid[g]);
      s.status = failed[g] ? "failed" : searches[g].status();
      s.highest_holding = searches[g].highest_holding();
      s.first_failing = searches[g].lowest_failing();
      s.num_probes = searches[g].num_probes();
      search_rows.push_back(s);
    }
  }

  const auto t_merge = Clock::now();
  write_sweep_table(dir.string(), info, rows, search_rows);
  const double merge_s = seconds_since(t_merge);
  const double wall_s = seconds_since(t0);

  const int num_failed = static_cast<int>(runner.failures.size());
  std::printf("points        %zu: %d done earlier, %d ran (%d stale rerun), %d failed\n", rows.size(),
              runner.done_before, runner.ran, runner.num_stale, num_failed);
  for (const SearchRow& s : search_rows) {
    std::printf("search        %s: %s", describe(s.values).c_str(), s.status.c_str());
    if (s.status == "found" || s.status == "above_range")
      std::printf(", %s = %s holds %s", search.key.c_str(), format_probe(s.highest_holding, search.integer).c_str(),
                  info.search_attrs.front().second.c_str());
    std::printf(" (%d probes)\n", s.num_probes);
  }
  const double runner_s = wall_s - runner.backend_s;
  std::printf("wall          %.2f s; runner %.2f s (%.1f ms/point, merge %.2f s)", wall_s, runner_s,
              rows.empty() ? 0.0 : 1e3 * runner_s / rows.size(), merge_s);
  if (runner.process_s > 0)
    std::printf("; point processes %.2f s (runs' own %.2f s)", runner.process_s, runner.runs_own_s);
  std::printf("\n");
  std::printf("table         %s/sweep.h5, %s/sweep.csv%s\n", dir.c_str(), dir.c_str(),
              sweep.has_search ? (", " + dir.string() + "/search.csv").c_str() : "");
  if (num_failed > 0) {
    std::fprintf(stderr, "testbed sweep: %d point%s failed:\n", num_failed, num_failed == 1 ? "" : "s");
    for (const std::string& f : runner.failures) std::fprintf(stderr, "%s\n", f.c_str());
  }
  return num_failed > 0 ? 1 : 0;
}

}  // namespace testbed
