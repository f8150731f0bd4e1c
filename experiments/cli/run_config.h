// RunConfig: the sections of a run that are not one component's (model,
// executor, driver, sampling, SLOs, output), each component's config (engine,
// workload, cost model; the simulated driver's fleet and router), the rules
// that hold between components, and loading it all from an INI file and
// --section.key=value overrides. Every component binds its own keys.
#pragma once

#include <string>
#include <vector>

#include "engine/common/choice.h"
#include "engine/common/option_table.h"
#include "engine/driver.h"
#include "engine/engine.h"
#include "engine/executor.h"
#include "engine/proposer.h"
#include "engine/metrics/summary.h"
#include "engine/request.h"
#include "engine/semantic_cache.h"
#include "sim/cost_model.h"
#include "sim/simulated_driver.h"
#include "traces/workload.h"

namespace testbed {

struct ModelSection {
  std::string config = "experiments/models/tiny.json";  // Hugging Face config.json
  std::string weights = "dummy";                        // "dummy" or a .safetensors path
  uint64_t seed = 0;                                     // dummy weights
  int max_model_len = 0;                                 // 0: the model's max_position_embeddings
  std::string precision = "auto";                        // auto (the checkpoint's) | fp8 | w4a16
  int quant_group_size = 128;                            // w4a16: weights per scale along K
  std::string quantization = "rtn";                      // w4a16: rtn | gptq | awq
};

struct ExecutorSection {
  Choice<ExecutorRegistry> kind{"executor.kind", "cpu", "what runs a step"};
  std::string timing = "measured";  // measured (wall clock) | cost_model (predicted, deterministic)
};

struct DriverSection {
  // "auto": simulated for executor.kind = sim, else realtime.
  Choice<DriverRegistry> mode{"driver.mode", "auto", "what owns time (auto: simulated for the sim executor, else realtime)"};
  std::string progress = "auto";  // auto (on a terminal) | on | off
  std::string huge_pages = "auto";  // auto (simulations) | on | off: experiments/cli/huge_pages.h
};

struct OutputSection {
  bool steps = true;      // write /steps
  bool tokens = false;    // write /tokens (generated token ids)
  bool timeline = false;  // write timeline.json (Chrome trace / Perfetto)
  bool events = false;    // write /events (every request's named events; simulated mode)
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
  SpecConfig spec;  // speculative decoding (engine/proposer.h)
  // ingress.semantic_cache and its keys: every driver's (simulated: the fleet's
  // ingress; offline and realtime: engine/ingress.h, the model embeds).
  SemanticCacheConfig semantic_cache;
  OutputSection output;
  double requests_per_day = 1e6;  // metrics.requests_per_day: the rate per-day figures assume

  std::string config_path;  // the INI file it was read from
  // Keys the config set that the run will not use, and settings that contradict
  // each other without being errors: found by load_run_config, printed once
  // ("testbed: warning: ..."), recorded in the results file (/run warnings).
  std::vector<std::string> warnings;

  void bind(OptionTable& table);
  // Checks every component and the rules between them; throws ConfigError naming the key.
  void validate() const;
  // The driver mode "auto" resolves to.
  std::string driver_mode() const;
  // The driver to run, with "auto" resolved.
  Choice<DriverRegistry> resolved_driver() const;
  // The simulated driver's keys (fleet.*, router.*, pool.NAME.*).
  const SimulatedDriverParams& simulation() const;
  // The [pool.NAME] sections (empty: one unified pool of fleet.num_instances).
  const std::vector<PoolConfig>& pools() const { return simulation().pools; }
  std::vector<PoolConfig>& pools() {
    return dynamic_cast<SimulatedDriverParams&>(driver.mode.params("simulated")).pools;
  }
  // Names the pools to bind (before bind()).
  void set_pool_names(const std::vector<std::string>& names);
  bool needs_cost_model() const { return executor.kind.name == "sim" || executor.timing == "cost_model"; }
};

// Parses `config_path` and the --section.key=value overrides in `args` into
// `config`, bound into `table`, then validates it. Throws ConfigError naming
// the file or key. Flags the subcommand accepts (e.g. --output) are added to
// `table` with add_flag before the call.
void load_run_config(const std::string& config_path, const std::vector<std::string>& args, RunConfig& config,
                     OptionTable& table);
// Prints config.warnings on stderr, one "testbed: warning: ..." line each.
void print_warnings(const RunConfig& config);

// The file a path key names, or a ConfigError naming the key.
std::string require_file(const std::string& key, const std::string& path);

}  // namespace testbed
