// RunConfig: every component's config struct, the keys that set them, and the
// rules that hold between components. One place lists every key.
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/metrics/summary.h"
#include "engine/model/model_config.h"
#include "engine/request.h"
#include "experiments/cli/option_table.h"
#include "sim/cost_model.h"
#include "sim/fleet.h"
#include "sim/router.h"
#include "traces/workload.h"

namespace testbed {

struct ModelSection {
  std::string config = "experiments/models/tiny.json";  // Hugging Face config.json
  std::string weights = "dummy";                        // "dummy" or a .safetensors path
  uint64_t seed = 0;                                     // dummy weights
  int max_model_len = 0;                                 // 0: the model's max_position_embeddings
};

struct ExecutorSection {
  std::string kind = "cpu";         // cpu | sim | cuda
  std::string timing = "measured";  // measured (wall clock) | cost_model (predicted, deterministic)
};

struct DriverSection {
  std::string mode = "auto";      // auto | offline | realtime | simulated
  std::string progress = "auto";  // auto (on a terminal) | on | off
};

struct OutputSection {
  bool steps = true;    // write /steps
  bool tokens = false;    // write /tokens (generated token ids)
  bool timeline = false;  // write timeline.json (Chrome trace / Perfetto)
};

struct RunConfig {
  ModelSection model;
  ExecutorSection executor;
  DriverSection driver;
  EngineConfig engine;
  SamplingParams sampling;
  WorkloadConfig workload;
  CostModelConfig cost_model;
  SloConfig slo;
  OutputSection output;
  FleetConfig fleet;
  RouterConfig router;
  double requests_per_day = 1e6;  // metrics.requests_per_day: the rate per-day figures assume

  std::string config_path;  // the INI file it was read from
  std::string config_dir;   // its directory, for relative paths

  void bind(OptionTable& table);
  // Checks every component and the rules between them; throws ConfigError naming the key.
  void validate() const;
  // The driver mode "auto" resolves to.
  std::string driver_mode() const;
  // A path from the config: as given if it exists (relative to the working
  // directory), else relative to the config file's directory.
  std::string resolve_path(const std::string& key, const std::string& path) const;
};

// Parses `config_path` and the --section.key=value overrides in `args` into
// `config`. Throws ConfigError naming the file or key. `extra` are more
// command-line options the subcommand accepts (e.g. --output), parsed into `vm`.
void load_run_config(const std::string& config_path, const std::vector<std::string>& args, RunConfig& config,
                     OptionTable& table, const boost::program_options::options_description& extra,
                     boost::program_options::variables_map& vm);

}  // namespace testbed
