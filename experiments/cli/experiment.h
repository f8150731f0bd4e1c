// Running one experiment from a RunConfig and writing its files; shared by the
// run, fidelity and fleet commands.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/pending_files.h"
#include "engine/metrics/fleet_metrics.h"
#include "engine/metrics/results_file.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "experiments/cli/engine_factory.h"
#include "engine/common/option_table.h"
#include "experiments/cli/run_config.h"

namespace testbed {

struct ExperimentResult {
  std::unique_ptr<RunRecorder> recorder;
  Summary summary;
  double wall_s = 0.0;       // wall-clock time of the run
  double simulated_s = 0.0;  // simulated time (simulated mode)
  int64_t num_events = 0;    // simulated mode
  int num_instances = 1;
  FleetCostFacts facts;  // pools, GPUs, prices: what the fleet metrics were computed from
  std::string executor, mode;
};

// Checks, before a run spends its time, that `dir` can be written (it, or the
// nearest parent that exists, is a writable directory); creates nothing. A
// ConfigError naming `flag` ("--output") otherwise.
void require_writable_dir(const std::string& dir, const std::string& flag);

// Every request that arrived finished, or was cancelled or lost (counted): the
// run's conservation law. Throws std::logic_error (an internal error) when not.
void check_conservation(const RunRecorder& rec);

// Runs the configured workload under the configured driver, on as many
// engines as it asks for, each with the configured executor.
ExperimentResult run_experiment(const RunConfig& config, const RunSetup& setup);

// Writes DIR/results.h5 (requests, steps, summary, config; `extra` may add more
// before it is committed), DIR/config.ini and, with output.timeline, DIR/timeline.json.
// results.h5 appears last (written to a temporary name, renamed), so its presence
// means the run is complete.
void write_run_files(const std::string& dir, const RunConfig& config, const OptionTable& table,
                     const ExperimentResult& result, const std::function<void(ResultsFile&)>& extra = nullptr);

// Chrome-trace JSON (chrome://tracing, ui.perfetto.dev) of every step, one track per instance.
std::string timeline_json(const std::vector<StepRecord>& steps);

// results/<config name>-<hash>: the hash (8 hex digits) is of the resolved
// config, so runs that differ in any key, overrides included, never share one.
std::string default_output_dir(const std::string& config_path, const OptionTable& table);
std::string config_hash(const OptionTable& table);
// Before a run: `dir` must be writable, and may hold results only of the same
// resolved config (its config.ini; a rerun replaces them); anything else in it
// is an error naming the keys that differ, unless `overwrite`.
void check_output_dir(const std::string& dir, const OptionTable& table, bool overwrite, const std::string& flag = "--output");

// A comma-separated flag value's items, empty items dropped ("a,,b" -> a, b).
std::vector<std::string> split_commas(const std::string& s);

// A text file staged as PATH.tmp (removed on failure, on a signal, or when
// dropped uncommitted) and renamed to PATH by commit(): readers never see a
// half-written file, and several can be replaced together.
class StagedText {
 public:
  StagedText(const std::filesystem::path& path, const std::string& text);
  StagedText(const StagedText&) = delete;
  StagedText& operator=(const StagedText&) = delete;
  void commit();

 private:
  std::filesystem::path path_;
  PendingFile tmp_;
};

// Writes `text` to PATH.tmp and renames it to `path`.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace testbed
