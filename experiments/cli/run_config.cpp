#include "experiments/cli/run_config.h"

#include <filesystem>
#include <fstream>

#include "engine/config_error.h"

namespace po = boost::program_options;

namespace testbed {

void RunConfig::bind(OptionTable& t) {
  t.add("model.config", &model.config, "Hugging Face config.json of the model");
  t.add("model.weights", &model.weights, "'dummy' (seeded random) or a .safetensors file");
  t.add("model.seed", &model.seed, "seed of dummy weights");
  t.add("model.max_model_len", &model.max_model_len, "longest sequence (0: max_position_embeddings)");

  t.add("executor.kind", &executor.kind, "cpu | sim | cuda");
  t.add("executor.timing", &executor.timing, "measured | cost_model: where step durations come from");

  t.add("driver.mode", &driver.mode, "auto | offline | realtime | simulated");
  t.add("driver.progress", &driver.progress, "auto | on | off: progress line on stderr");

  SchedulerConfig& s = engine.scheduler;
  t.add("scheduler.max_num_seqs", &s.max_num_seqs, "most sequences running at once");
  t.add("scheduler.max_batch_tokens", &s.max_batch_tokens, "token budget of one step");
  t.add("scheduler.chunked_prefill", &s.chunked_prefill, "split long prompts across steps");
  t.add("scheduler.chunk_size", &s.chunk_size, "most prompt tokens one sequence gets per step");
  t.add("scheduler.policy", &s.policy, "scheduling policy (fcfs, ...)");

  CacheConfig& c = engine.cache;
  t.add("cache.block_size", &c.block_size, "tokens per KV block");
  t.add("cache.prefix_cache", &c.prefix_cache, "reuse cached blocks by chained hash");
  t.add("cache.num_blocks", &c.num_blocks, "KV blocks (0: from device memory, simulated GPUs only)");
  t.add("cache.gpu_memory_fraction", &c.gpu_memory_fraction, "share of device memory for weights and KV");

  t.add("sampling.temperature", &sampling.temperature, "0 = greedy");
  t.add("sampling.top_k", &sampling.top_k, "0 = off");
  t.add("sampling.top_p", &sampling.top_p, "1 = off");
  t.add("sampling.seed", &sampling.seed, "seed of every draw (with request id and position)");

  workload.bind(t);

  CostModelConfig& m = cost_model;
  t.add("cost_model.kind", &m.kind, "linear | roofline | profiled");
  t.add("cost_model.hardware", &m.hardware, "roofline: hardware spec .ini");
  t.add("cost_model.profile", &m.profile, "profiled: step-time table .h5");
  t.add("cost_model.tensor_parallel", &m.tensor_parallel, "roofline: GPUs per instance");
  t.add("cost_model.step_overhead_s", &m.step_overhead_s, "linear: fixed cost per step");
  t.add("cost_model.prefill_token_s", &m.prefill_token_s, "linear: cost per prefill token");
  t.add("cost_model.decode_seq_s", &m.decode_seq_s, "linear: cost per decoding sequence");
  t.add("cost_model.context_token_s", &m.context_token_s, "linear: cost per context token attended");

  fleet.bind(t);
  router.bind(t);
  t.add("metrics.requests_per_day", &requests_per_day, "request rate the per-day GPU-hour figures assume");

  t.add("slo.ttft_s", &slo.ttft_s, "TTFT target for goodput (0: none)");
  t.add("slo.tpot_s", &slo.tpot_s, "TPOT target for goodput (0: none)");

  t.add("output.steps", &output.steps, "write the per-step table");
  t.add("output.tokens", &output.tokens, "write generated token ids");
  t.add("output.timeline", &output.timeline, "write timeline.json (Chrome trace, opens in Perfetto)");
}

std::string RunConfig::driver_mode() const {
  if (driver.mode != "auto") return driver.mode;
  return executor.kind == "sim" ? "simulated" : "realtime";
}

void RunConfig::validate() const {
  require(executor.kind == "cpu" || executor.kind == "sim" || executor.kind == "cuda", "executor.kind",
          "unknown executor '" + executor.kind + "' (known: cpu, cuda, sim)");
  require(executor.timing == "measured" || executor.timing == "cost_model", "executor.timing",
          "must be 'measured' or 'cost_model'");
  const std::string mode = driver_mode();
  require(mode == "offline" || mode == "realtime" || mode == "simulated", "driver.mode",
          "unknown mode '" + driver.mode + "' (known: auto, offline, realtime, simulated)");
  require(driver.progress == "auto" || driver.progress == "on" || driver.progress == "off", "driver.progress",
          "must be auto, on or off");
  require(!(executor.kind == "sim" && mode != "simulated"), "driver.mode",
          "executor.kind = sim runs only in simulated mode");
  require(!(executor.timing == "cost_model" && mode != "simulated"), "executor.timing",
          "cost_model timing needs driver.mode = simulated (wall-clock drivers measure time)");
  require(model.max_model_len >= 0, "model.max_model_len", "must be >= 0");
  engine.scheduler.validate();
  engine.cache.validate();
  require(sampling.temperature >= 0, "sampling.temperature", "must be >= 0");
  require(sampling.top_k >= 0, "sampling.top_k", "must be >= 0");
  require(sampling.top_p > 0 && sampling.top_p <= 1, "sampling.top_p", "must be in (0, 1]");
  workload.validate();
  if (executor.kind == "sim" || executor.timing == "cost_model") cost_model.validate();
  slo.validate();
  fleet.validate();
  router.validate();
  require(requests_per_day > 0, "metrics.requests_per_day", "must be positive");
  require(fleet.num_instances == 1 || mode == "simulated", "fleet.num_instances",
          "fleets of several instances run in the simulator (driver.mode = simulated)");
}

std::string RunConfig::resolve_path(const std::string& key, const std::string& path) const {
  namespace fs = std::filesystem;
  if (path.empty()) throw ConfigError(key + ": no path given");
  if (fs::exists(path)) return path;
  const fs::path beside = fs::path(config_dir) / path;
  if (!fs::path(path).is_absolute() && !config_dir.empty() && fs::exists(beside)) return beside.string();
  throw ConfigError(key + ": file not found: " + path +
                    (config_dir.empty() || fs::path(path).is_absolute() ? "" : " (nor " + beside.string() + ")"));
}

void load_run_config(const std::string& config_path, const std::vector<std::string>& args, RunConfig& config,
                     OptionTable& table, const po::options_description& extra, po::variables_map& vm) {
  config.bind(table);
  po::options_description cli;
  cli.add(table.description()).add(extra);
  try {
    // Command-line values are stored first: Boost keeps the first value of a key.
    po::store(po::command_line_parser(args).options(cli).style(po::command_line_style::unix_style).run(), vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string("command line: ") + e.what());
  }
  std::ifstream in(config_path);
  if (!in) throw ConfigError(config_path + ": cannot open config file");
  try {
    po::store(po::parse_config_file(in, table.description(), /*allow_unregistered=*/false), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(config_path + ": " + e.what());
  }
  config.config_path = config_path;
  config.config_dir = std::filesystem::path(config_path).parent_path().string();
  config.validate();
}

}  // namespace testbed
