// testbed fidelity CONFIG.ini [--output DIR] [--repeats N] [--profile-repeats N] [--pin-cpu CORE]
//                  [--section.key=value ...]
// testbed fidelity CONFIG.ini --measured TABLE.csv [--output DIR] [--section.key=value ...]
//
// With --measured: how far is the simulator from real serving? Each point of
// the measured table (experiments/cli/measured_table.h) is simulated with
// CONFIG (a simulator config) and its workload; prints and writes
// DIR/fidelity.h5 (/points: per point the measured value, the simulated one
// and the signed error (sim - real) / real of each metric; /summary:
// median_abs_err_<metric> and max_abs_err_<metric>), and each point's run in
// DIR/points/NAME/.
//
// Without: how far is the simulator from the real engine? Runs the configured
// workload on the real executor --repeats times (real runs of one config
// differ on a shared machine, and that spread is the yardstick), profiles
// that executor, simulates the same workload with the profiled cost model
// (same scheduler code, same KV capacity), and reports per metric (mean and
// p99 TTFT, TPOT, E2E) the real runs' median and range, the signed error
// (sim - median) / median and whether the simulation lies within the range.
// Writes DIR/results.h5 (the median real run, with err_*, real_*_median /
// _min / _max / _spread and in_real_range_* in /summary, each real run's
// metrics in /real_runs, the simulated summary in /sim_summary),
// DIR/sim/results.h5 and DIR/profile.h5.
#include <algorithm>
#include <sched.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "engine/common/config_error.h"
#include "engine/metrics/units.h"
#include "experiments/cli/command.h"
#include "experiments/cli/experiment.h"
#include "experiments/cli/huge_pages.h"
#include "experiments/cli/measured_table.h"
#include "experiments/cli/profile_command.h"
#include "experiments/cli/provenance.h"
#include "engine/metrics/results_file.h"

namespace fs = std::filesystem;

namespace testbed {
namespace {

// Binds this process to one CPU core (Linux): steadier step times on a shared machine.
void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  require(cpu < CPU_SETSIZE, "--pin-cpu", "core " + std::to_string(cpu) + " is out of range");
  CPU_SET(cpu, &set);
  require(sched_setaffinity(0, sizeof set, &set) == 0, "--pin-cpu",
          "cannot run on core " + std::to_string(cpu) + " (" + std::strerror(errno) + ")");
}

int fidelity_measured(const std::vector<std::string>& args, const std::string& measured, std::string output) {
  const std::vector<MeasuredPoint> points = read_measured_table(measured);
  fs::create_directories(output);
  const size_t M = kMeasuredMetrics.size();
  std::vector<std::string> names;
  std::vector<std::vector<double>> real(M), sim(M), err(M);
  std::printf("fidelity %s against %s: %zu measured points\n\n%-14s", args[0].c_str(), measured.c_str(),
              points.size(), "point");
  for (const MeasuredMetric& m : kMeasuredMetrics) std::printf(" %20s", m.column);
  std::printf("\n");
  for (const MeasuredPoint& p : points) {
    const Summary summary = simulate_measured_point(args[0], {args.begin() + 1, args.end()}, p,
                                                    (fs::path(output) / "points" / p.name).string());
    names.push_back(p.name);
    std::printf("%-14s", p.name.c_str());
    for (size_t m = 0; m < M; ++m) {
      const double measured_v = p.values[m], sim_v = summary.get(kMeasuredMetrics[m].summary);
      real[m].push_back(measured_v);
      sim[m].push_back(sim_v);
      err[m].push_back(std::isnan(measured_v) ? NAN : (sim_v - measured_v) / measured_v);
      if (std::isnan(measured_v))
        std::printf(" %20s", "-");
      else
        std::printf(" %10.4g %+8.1f%%", measured_v / kMeasuredMetrics[m].scale, 100 * err[m].back());
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  ResultsFile file((fs::path(output) / "fidelity.h5").string());
  file.add_column("points", "point", "text", names);
  std::printf("%-14s", "median |err|");
  for (size_t m = 0; m < M; ++m) {
    const std::string c = kMeasuredMetrics[m].column;
    // Named after the table's column, in the summary's units (a _ms column's values are seconds here).
    const std::string unit = summary_unit(kMeasuredMetrics[m].summary);
    file.add_column("points", "real_" + c, unit, real[m]);
    file.add_column("points", "sim_" + c, unit, sim[m]);
    file.add_column("points", "err_" + c, "1", err[m]);
    std::vector<double> abs_err;
    for (double e : err[m])
      if (!std::isnan(e)) abs_err.push_back(std::abs(e));
    if (abs_err.empty()) {
      std::printf(" %20s", "-");
      continue;
    }
    const double med = percentile(abs_err, 50), worst = *std::max_element(abs_err.begin(), abs_err.end());
    file.set_attr("summary", "median_abs_err_" + c, med);
    file.set_attr("summary", "max_abs_err_" + c, worst);
    std::printf(" %19.1f%%", 100 * med);
  }
  file.set_attr("run", "config", args[0]);
  file.set_attr("run", "measured", measured);
  write_provenance(file);
  file.commit();
  std::printf("\n\nresults       %s/fidelity.h5, %s/points/*/results.h5\n", output.c_str(), output.c_str());
  return 0;
}

int fidelity_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: testbed fidelity CONFIG.ini [--output DIR] [--repeats N] [--profile-repeats N] [--pin-cpu CORE]\n"
                 "                        [--section.key=value ...]\n"
                 "       testbed fidelity SIM_CONFIG.ini --measured TABLE.csv [--output DIR] [--section.key=value ...]\n\n"
                 "N real runs (default 3), a profile, a simulated run of the same workload; prints the real\n"
                 "runs' median and range of mean and p99 TTFT, TPOT and E2E, the simulation's error against\n"
                 "the median and whether it lies within the range (err_*, real_*, in_real_range_* in\n"
                 "DIR/results.h5 /summary).\n"
                 "With --measured: simulates each measured serving point of TABLE.csv (see\n"
                 "experiments/measured/) and prints the signed errors and their median |error|.\n";
    return args.empty() ? 2 : 0;
  }
  std::string output, measured;
  int repeats = 3, profile_repeats = 5, pin_cpu = -1;
  RunConfig config;
  OptionTable table;
  table.add_flag("output", &output, "results directory");
  table.add_flag("repeats", &repeats, "real runs of the config (their spread is the yardstick)");
  table.add_flag("profile-repeats", &profile_repeats, "profile runs per grid point");
  table.add_flag("pin-cpu", &pin_cpu, "run the real runs and the profile on this CPU core only (-1: no pinning)");
  table.add_flag("measured", &measured, "measured serving points (CSV): simulate each and compare");
  load_run_config(args[0], {args.begin() + 1, args.end()}, config, table);
  apply_huge_pages(config.driver.huge_pages, /*simulates=*/true);
  print_warnings(config);
  if (!measured.empty()) {
    for (const char* flag : {"repeats", "profile-repeats", "pin-cpu"})
      require(!table.was_set(flag), std::string("--") + flag, "applies to the real-run comparison, not to --measured");
    return fidelity_measured(args, measured, output.empty() ? default_output_dir(args[0], table) : output);
  }
  require(config.executor.kind.name != "sim", "executor.kind",
          "fidelity compares a real executor (cpu or cuda) with the simulator");
  require(config.driver_mode() != "simulated", "driver.mode", "the real run needs a wall-clock driver (realtime or offline)");
  require(repeats >= 1 && repeats <= 100, "--repeats", "must be in [1, 100]");
  require(profile_repeats >= 1, "--profile-repeats", "must be >= 1");
  if (pin_cpu >= 0) pin_to_cpu(pin_cpu);
  if (output.empty()) output = default_output_dir(args[0], table);
  fs::create_directories(output);

  const RunSetup setup = prepare_run(config);
  std::vector<ExperimentResult> reals;
  for (int i = 0; i < repeats; ++i) {
    std::printf("fidelity %s: 1/3 real run %d of %d (%s, %s)\n", args[0].c_str(), i + 1, repeats,
                config.executor.kind.name.c_str(), config.driver_mode().c_str());
    std::fflush(stdout);
    reals.push_back(run_experiment(config, setup));
  }

  std::printf("fidelity: 2/3 profiling the executor\n");
  std::fflush(stdout);
  const ProfileTable profile = profile_configured_executor(config, profile_repeats, 0);
  const std::string profile_path = (fs::path(output) / "profile.h5").string();
  profile.save(profile_path);

  std::printf("fidelity: 3/3 simulated run with the profiled cost model\n");
  std::fflush(stdout);
  RunConfig sim_config = config;
  sim_config.executor.kind.name = "sim";
  sim_config.executor.timing = "measured";
  set_options(sim_config.cost_model, {{"cost_model.kind", "profiled"}, {"cost_model.profile", profile_path}});
  for (PoolConfig& p : sim_config.pools())  // a prefill and a decode engine: both are the profiled executor
    set_options(p.cost_model, {{"cost_model.kind", "profiled"}, {"cost_model.profile", profile_path}});
  sim_config.driver.mode.name = "simulated";
  if (config.driver_mode() == "offline") sim_config.workload.rate = 0.0;  // offline: everything at t = 0
  const RunSetup sim_setup = prepare_run(sim_config);
  const ExperimentResult sim = run_experiment(sim_config, sim_setup);
  write_run_files((fs::path(output) / "sim").string(), sim_config, table, sim);

  // The yardstick: the real runs' median and range of each metric. The stored
  // real run is the one whose mean E2E is the median.
  std::vector<size_t> order(reals.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reals[a].summary.get("e2e_mean_s") < reals[b].summary.get("e2e_mean_s");
  });
  const ExperimentResult& real = reals[order[order.size() / 2]];
  Summary summary = real.summary;
  summary.set("real_runs", static_cast<double>(repeats));
  std::printf("\n%-10s %11s %23s %8s %11s %9s %9s\n", "metric", "real median", "real range", "spread", "sim",
              "error", "in range");
  int in_range = 0, compared = 0;
  for (const char* metric : {"ttft_mean", "ttft_p99", "tpot_mean", "tpot_p99", "e2e_mean", "e2e_p99"}) {
    const std::string m(metric), key = m + "_s";
    std::vector<double> v;
    for (const ExperimentResult& r : reals) v.push_back(r.summary.get(key));
    const double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
    const double med = percentile(v, 50), s = sim.summary.get(key);
    const double err = med != 0 ? (s - med) / med : NAN, spread = med != 0 ? (hi - lo) / med : NAN;
    const bool inside = s >= lo && s <= hi;
    summary.set("err_" + m, err);
    summary.set("real_" + m + "_median", med);
    summary.set("real_" + m + "_min", lo);
    summary.set("real_" + m + "_max", hi);
    summary.set("real_" + m + "_spread", spread);
    summary.set("in_real_range_" + m, inside ? 1.0 : 0.0);
    in_range += inside;
    ++compared;
    std::printf("%-10s %11.5f %11.5f..%-11.5f %7.1f%% %11.5f %+8.1f%% %9s\n", metric, med, lo, hi, 100 * spread, s,
                100 * err, repeats > 1 ? (inside ? "yes" : "no") : "-");
  }
  if (repeats > 1)
    std::printf("\nthe simulation lies within the %d real runs' range on %d of %d metrics\n", repeats, in_range,
                compared);
  ExperimentResult stored{nullptr, summary, real.wall_s, real.simulated_s, real.num_events, real.num_instances, real.facts, real.executor, real.mode};
  stored.recorder = std::make_unique<RunRecorder>(*real.recorder);
  write_run_files(output, config, table, stored, [&](ResultsFile& file) {
    for (const auto& [name, value] : sim.summary.values()) file.set_attr("sim_summary", name, value);
    for (const char* metric : {"ttft_mean_s", "ttft_p99_s", "tpot_mean_s", "tpot_p99_s", "e2e_mean_s", "e2e_p99_s"}) {
      std::vector<double> v;
      for (const ExperimentResult& r : reals) v.push_back(r.summary.get(metric));
      file.add_column("real_runs", metric, v);
    }
    file.set_attr("run", "profile", profile_path);
  });
  std::printf("\nresults       %s/results.h5 (the median real run, with err_* and real_*), %s/sim/results.h5, %s\n",
              output.c_str(), output.c_str(), profile_path.c_str());
  return 0;
}

}  // namespace

TESTBED_COMMAND("fidelity", "fidelity CONFIG.ini [--output DIR] [--repeats N] [--measured TABLE.csv]",
                "real runs vs simulation with the profiled cost model, or simulation vs measured serving points: "
                "errors of TTFT, TPOT, E2E",
                fidelity_command);

}  // namespace testbed
