#include "experiments/cli/run_config.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/block_hash_table.h"
#include "engine/common/config_error.h"
#include "engine/model/model_config.h"
#include "sim/hardware_spec.h"
#include "sim/memory_planner.h"

namespace testbed {

void RunConfig::bind(OptionTable& t) {
  t.add_path("model.config", &model.config, "Hugging Face config.json of the model");
  t.add_path("model.weights", &model.weights, "'dummy' (seeded random) or a .safetensors file");
  t.add("model.seed", &model.seed, "seed of dummy weights");
  t.add("model.max_model_len", &model.max_model_len, "longest sequence (0: max_position_embeddings)");
  t.add("model.precision", &model.precision,
        "linear layers: auto (the checkpoint's torch_dtype), fp8 (e4m3, per-channel scales) or w4a16 (int4 groups, "
        "16-bit activations); simulated and CPU executors");
  t.add("model.quant_group_size", &model.quant_group_size, "w4a16: weights per scale and zero point along K");
  t.add("model.quantization", &model.quantization,
        "w4a16 on the CPU executor: rtn (round to nearest), gptq or awq (calibrated on a fixed token set)");

  executor.kind.bind(t);
  t.add("executor.timing", &executor.timing, "measured | cost_model: where step durations come from");

  driver.mode.bind(t);
  semantic_cache.bind(t);  // after the drivers' keys: ingress.* in the order it always had
  t.add("driver.progress", &driver.progress, "auto | on | off: progress line on stderr");
  t.add("driver.huge_pages", &driver.huge_pages,
        "auto (for simulations) | on | off: malloc's memory on transparent huge pages (the process executes itself "
        "again with glibc tunables)");

  engine.bind(t);

  t.add("sampling.temperature", &sampling.temperature, "0 = greedy");
  t.add("sampling.top_k", &sampling.top_k, "0 = off");
  t.add("sampling.top_p", &sampling.top_p, "1 = off");
  t.add("sampling.seed", &sampling.seed, "seed of every draw (with request id and position)");

  workload.bind(t);
  cost_model.bind(t);
  t.add("metrics.requests_per_day", &requests_per_day, "request rate the per-day GPU-hour figures assume");

  t.add("slo.ttft_s", &slo.ttft_s, "TTFT target for goodput (0: none)");
  t.add("slo.tpot_s", &slo.tpot_s, "TPOT target for goodput (0: none)");
  t.add("slo.attainment", &slo.attainment, "share of requests that must meet both targets (meets_slo; DistServe goodput)");

  spec.bind(t);

  t.add("output.steps", &output.steps, "write the per-step table");
  t.add("output.tokens", &output.tokens, "write generated token ids");
  t.add("output.timeline", &output.timeline, "write timeline.json (Chrome trace, opens in Perfetto)");
  t.add("output.events", &output.events, "write /events: each request's named events (simulated mode)");
}

std::string RunConfig::driver_mode() const {
  if (driver.mode.name != "auto") return driver.mode.name;
  return executor.kind.name == "sim" ? "simulated" : "realtime";
}

Choice<DriverRegistry> RunConfig::resolved_driver() const {
  Choice<DriverRegistry> d = driver.mode;
  d.name = driver_mode();
  return d;
}

const SimulatedDriverParams& RunConfig::simulation() const {
  return dynamic_cast<const SimulatedDriverParams&>(driver.mode.params("simulated"));
}

void RunConfig::set_pool_names(const std::vector<std::string>& names) {
  auto& sim = dynamic_cast<SimulatedDriverParams&>(driver.mode.params("simulated"));
  sim.pools.clear();
  for (const std::string& n : names) {
    PoolConfig p;
    p.name = n;
    sim.pools.push_back(std::move(p));
  }
}

void RunConfig::validate() const {
  executor.kind.validate();
  require(executor.timing == "measured" || executor.timing == "cost_model", "executor.timing",
          "must be 'measured' or 'cost_model'");
  const std::string mode = driver_mode();
  require(DriverRegistry::instance().contains(mode), "driver.mode",
          "unknown mode '" + driver.mode.name + "' (known: auto, " + DriverRegistry::instance().names_joined() + ")");
  resolved_driver().validate();
  require(driver.progress == "auto" || driver.progress == "on" || driver.progress == "off", "driver.progress",
          "must be auto, on or off");
  require(driver.huge_pages == "auto" || driver.huge_pages == "on" || driver.huge_pages == "off", "driver.huge_pages",
          "must be auto, on or off");
  require(!(executor.kind.name == "sim" && mode != "simulated"), "driver.mode",
          "executor.kind = sim runs only in simulated mode");
  require(!(executor.timing == "cost_model" && mode != "simulated"), "executor.timing",
          "cost_model timing needs driver.mode = simulated (wall-clock drivers measure time)");
  require(model.max_model_len >= 0, "model.max_model_len", "must be >= 0");
  require(model.precision == "auto" || model.precision == "fp8" || model.precision == "w4a16", "model.precision",
          "'" + model.precision + "' is not auto, fp8 or w4a16");
  require(model.quant_group_size == 32 || model.quant_group_size == 64 || model.quant_group_size == 128,
          "model.quant_group_size", "must be 32, 64 or 128");
  require(model.quant_group_size == 128 || model.precision == "w4a16", "model.quant_group_size",
          "applies to model.precision = w4a16");
  require(model.quantization == "rtn" || model.quantization == "gptq" || model.quantization == "awq",
          "model.quantization", "'" + model.quantization + "' is not rtn, gptq or awq");
  require(model.quantization == "rtn" || model.precision == "w4a16", "model.quantization",
          "applies to model.precision = w4a16");
  engine.scheduler.validate();
  engine.cache.validate();
  require(sampling.temperature >= 0, "sampling.temperature", "must be >= 0");
  require(sampling.top_k >= 0, "sampling.top_k", "must be >= 0");
  require(sampling.top_p > 0 && sampling.top_p <= 1, "sampling.top_p", "must be in (0, 1]");
  workload.validate();
  cost_model.validate();
  slo.validate();
  spec.validate();
  semantic_cache.validate();
  const bool sim = executor.kind.name == "sim";
  require(!(spec.enabled() && sim && spec.acceptance.empty()), "spec.acceptance",
          "the simulated executor needs an acceptance model with spec.method: fixed:A (each draft token kept with "
          "probability A)");
  require(spec.acceptance.empty() || (spec.enabled() && sim), "spec.acceptance",
          "applies to the simulated executor with spec.method set (real executors verify their drafts)");
  require(!(spec.rejection() && sim), "spec.verify",
          "applies to real executors (the simulated executor accepts by spec.acceptance)");
  require(requests_per_day > 0, "metrics.requests_per_day", "must be positive");
  require(!output.timeline || output.steps, "output.timeline",
          "is drawn from the per-step table: set output.steps = true too (a timeline without steps would be empty)");
  require(simulation().fleet.num_instances == 1 || mode == "simulated", "fleet.num_instances",
          "fleets of several instances run in the simulator (driver.mode = simulated)");
  require(simulation().fleet.threads == 1 || mode == "simulated", "fleet.threads",
          "steps a simulated fleet on several threads (driver.mode = simulated)");
  require(simulation().fleet.router_refresh_s == 0 || mode == "simulated", "fleet.router_refresh_s",
          "is the simulated routers' view (driver.mode = simulated)");
  require(!output.events || mode == "simulated", "output.events", "the event log comes from the simulator (driver.mode = simulated)");
  // The fleet's mechanisms exist only in the simulator: set on a wall-clock run they would do nothing.
  if (mode != "simulated") {
    const SimulatedDriverParams& sp = simulation();
    const char* why = "is simulated: the fleet's faults, autoscaling and model routing run in driver.mode = simulated";
    require(sp.faults.fail.empty(), "fault.fail", why);
    require(sp.faults.slow.empty(), "fault.slow", why);
    require(sp.faults.kv_event_delay_s == 0, "fault.kv_event_delay_s", why);
    require(!sp.autoscale.enabled(), "autoscale.policy", why);
    require(!sp.model_routing.enabled(), "ingress.model_router", why);
  }
  if (!pools().empty() && mode != "simulated") {
    // On the wall clock: one prefill engine and one decode engine in this process (run_disaggregated).
    const auto& p = pools();
    const bool pd = p.size() == 2 && p[0].hands_off_after_prefill() && p[0].size == 1 && p[1].receives_handoffs() &&
                    p[1].size == 1;
    require(pd, "driver.mode",
            "in " + mode + " mode pools are one prefill instance and one decode instance, in that order "
            "([pool.P] role = prefill, size = 1, then [pool.D] role = decode, size = 1); larger pools run in the "
            "simulator (driver.mode = simulated)");
  }
  require(!(semantic_cache.enabled && !pools().empty() && mode != "simulated"), "ingress.semantic_cache",
          "in " + mode + " mode the ingress cache fronts one engine; with prefill/decode pools it runs in the simulator "
          "(driver.mode = simulated)");
}

namespace {

bool starts_with(const std::string& s, const std::string& head) { return s.compare(0, head.size(), head) == 0; }

// Keys that a config can set but that the pools make meaningless: an error, never ignored.
// (Top-level link.* keys are the decode pools' defaults, like a router's keys
// when another router is chosen: accepted and validated, used where a decode pool is.)
void check_pool_keys(const RunConfig& config, const OptionTable& table) {
  const std::vector<PoolConfig>& pools = config.pools();
  for (const auto& [key, value] : table.resolved()) {
    if (!table.was_set(key)) continue;
    // With pools, fleet.num_instances stays at its default (as a resolved config.ini writes it) or states their sum.
    if (!pools.empty() && key == "fleet.num_instances" && value != table.default_value(key) &&
        config.simulation().fleet.num_instances != config.simulation().num_instances())
      throw ConfigError(key + ": the pools give the instances (pool.NAME.size, " +
                        std::to_string(config.simulation().num_instances()) + " in all); remove fleet.num_instances");
    // (A value that changes nothing, as a resolved config.ini states it, is fine.)
    for (const PoolConfig& p : pools) {
      const std::string own = p.prefix() + "link.";
      if (starts_with(key, own) && !p.receives_handoffs() && value != table.value(key.substr(p.prefix().size())))
        throw ConfigError(key + ": only a decode pool receives KV over a link (" + p.prefix() + "role is " + p.role.name +
                          ")");
    }
  }
}

// ingress.lookup_s is the simulator's price of a lookup; the wall-clock drivers
// measure theirs (embedding + search). Its default (as a resolved config.ini
// states it) is fine.
void check_ingress_keys(const RunConfig& config, const OptionTable& table) {
  const std::string key = "ingress.lookup_s";
  if (config.driver_mode() != "simulated" && table.was_set(key) &&
      config.semantic_cache.lookup_s != SemanticCacheConfig{}.lookup_s)
    throw ConfigError(key + ": " + config.driver_mode() +
                      " runs measure each lookup (the model's embedding and the search): the key applies to "
                      "driver.mode = simulated");
}

// A regular file at `path`; false (never a filesystem_error) for a path the OS
// rejects, e.g. longer than PATH_MAX: the caller names the key.
bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

double physical_memory_bytes() {
  return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
}

std::string gib_text(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return b;
}

// Settings that only the model and the hardware can contradict: a context the
// model does not have, a cache larger than the device's memory or than this
// machine can hold (a bad_alloc halfway through a run, otherwise).
void check_against_model(const RunConfig& config, std::vector<std::string>& warnings) {
  namespace fs = std::filesystem;
  if (config.model.config.empty() || !is_file(config.model.config)) return;  // reported where it is used
  const ModelConfig model = ModelConfig::from_json_file(config.model.config);
  const bool simulated = config.executor.kind.name == "sim";
  if (config.model.max_model_len > model.max_position_embeddings) {
    const std::string what = std::to_string(config.model.max_model_len) + " is longer than " + model.name +
                             "'s max_position_embeddings (" + std::to_string(model.max_position_embeddings) + ")";
    require(simulated, "model.max_model_len", what + ": its position encoding is defined up to there");
    warnings.push_back("model.max_model_len: " + what + ": the simulator runs it, a real server would refuse");
  }
  const int blocks = config.engine.cache.num_blocks;
  if (blocks <= 0) return;  // derived from the device's memory
  const int block_size = config.engine.cache.block_size;
  // What this process allocates: each engine's block table (24 bytes a block),
  // and on the CPU executor the cache itself (K and V, fp32).
  const int instances = config.simulation().num_instances();
  const double per_block = 24.0 + (simulated ? 0.0 : static_cast<double>(block_size) * model.kv_bytes_per_token(4));
  const double host = per_block * blocks * std::max(1, instances);
  require(host <= physical_memory_bytes(), "cache.num_blocks",
          std::to_string(blocks) + " blocks need " + gib_text(host) + " of host memory" +
              (instances > 1 ? " for " + std::to_string(instances) + " instances" : std::string()) + "; this machine has " +
              gib_text(physical_memory_bytes()));
  require(!config.engine.cache.prefix_cache || static_cast<size_t>(blocks) <= BlockHashTable::kMaxEntries,
          "cache.num_blocks", std::to_string(blocks) + " blocks are more than the prefix cache indexes (" +
                                  std::to_string(BlockHashTable::kMaxEntries) + "; cache.prefix_cache = false has no limit)");
  const std::string& hw_path = config.cost_model.hardware;
  if (!simulated || hw_path.empty() || !is_file(hw_path)) return;
  const HardwareSpec hw = HardwareSpec::from_ini_file(hw_path);
  const int fits = kv_blocks_from_memory(hw, model, block_size, config.engine.cache.gpu_memory_fraction,
                                         config.cost_model.tensor_parallel, nullptr);
  if (blocks > fits)
    warnings.push_back("cache.num_blocks: " + std::to_string(blocks) + " blocks are more than " + hw.name + " holds (" +
                       std::to_string(fits) + " after the weights at cache.gpu_memory_fraction " +
                       format_value(config.engine.cache.gpu_memory_fraction) +
                       "): the run simulates a larger memory (0 derives the count from the device)");
}

// Set keys the run will not use (their component is not chosen, or another key
// decides in their place) and settings that contradict each other: warnings.
std::vector<std::string> unused_settings(const RunConfig& config, OptionTable& table) {
  table.resolve_as("driver.mode", config.driver_mode());
  std::vector<std::string> out = table.unused_keys();
  // Set to something other than its default: a resolved config.ini states every key.
  const auto set = [&](const std::string& key) { return table.was_set(key) && table.value(key) != table.default_value(key); };
  const auto unused = [&](const std::string& key, const std::string& why) {
    if (set(key)) out.push_back(key + ": not used: " + why);
  };
  const WorkloadConfig& w = config.workload;
  if (w.kind.name == "trace") {
    unused("workload.num_requests", "the trace gives the requests (trace.max_requests caps how many)");
    unused("workload.output_tokens", "the trace gives each output length (trace.output_tokens overrides them)");
    if (table.value("trace.arrivals") == "trace")
      for (const char* key : {"workload.rate", "workload.arrival", "workload.burstiness"})
        unused(key, "the trace's timestamps give the arrivals (trace.arrivals = trace; poisson, gamma or constant "
                    "generate them at workload.rate)");
    else if (table.value("trace.arrivals") != "gamma")
      unused("workload.burstiness", "it shapes gamma arrivals, and trace.arrivals is " + table.value("trace.arrivals"));
  } else if (w.arrival != "gamma") {
    unused("workload.burstiness", "it shapes gamma arrivals, and workload.arrival is " + w.arrival);
  }
  if (w.kind.name == "mix") {
    const bool profiled = !table.value("workload.profile_trace").empty();
    if (profiled)
      unused("workload.output_tokens", "the rows of workload.profile_trace give the output lengths");
    else
      unused("workload.profile_format", "workload.profile_trace is not set");
    if (std::stod(table.value("workload.share_chat")) == 0)
      for (const char* key : {"workload.turns", "workload.turn_gap_s"})
        unused(key, "workload.share_chat is 0 (no conversations)");
  }
  if (!config.spec.enabled())
    for (const char* key : {"spec.num_tokens", "spec.max_batch_size", "spec.verify", "spec.acceptance"})
      unused(key, "spec.method is none (no speculative decoding)");
  if (!config.needs_cost_model())
    for (const auto& [key, value] : table.resolved())
      if (starts_with(key, "cost_model.") && key != "cost_model.hardware" && key != "cost_model.tensor_parallel")
        unused(key, "executor " + config.executor.kind.name + " with executor.timing = " + config.executor.timing +
                        " measures its steps (a cost model times them with executor.kind = sim or executor.timing = cost_model)");
  const SchedulerConfig& sch = config.engine.scheduler;
  if (!sch.chunked_prefill && config.pools().empty())  // a pool may chunk with the top-level size it inherits
    unused("scheduler.chunk_size", "scheduler.chunked_prefill is false (a prompt is prefilled in one step)");
  else if (sch.chunk_size > sch.max_batch_tokens)
    out.push_back("scheduler.chunk_size: " + std::to_string(sch.chunk_size) + " is larger than scheduler.max_batch_tokens (" +
                  std::to_string(sch.max_batch_tokens) + "): no chunk exceeds the step's budget, so chunks are at most " +
                  std::to_string(sch.max_batch_tokens) + " tokens; lower chunk_size or raise max_batch_tokens");
  check_against_model(config, out);
  return out;
}

}  // namespace

std::string require_file(const std::string& key, const std::string& path) {
  require(!path.empty(), key, "no path given");
  require(is_file(path), key, "file not found: " + path);
  return path;
}

namespace {

// frontend.* left unset take the hardware spec's [serving] values (0 without a spec).
void apply_serving_defaults(const RunConfig& config, OptionTable& table) {
  const std::string& path = config.cost_model.hardware;
  if (path.empty() || !is_file(path)) return;  // a missing spec is reported later
  const HardwareSpec hw = HardwareSpec::from_ini_file(path);
  const std::pair<const char*, double> keys[] = {{"frontend.request_s", hw.serving_request_s},
                                                 {"frontend.output_lag_steps", hw.serving_output_lag_steps},
                                                 {"frontend.output_s", hw.serving_output_s}};
  for (const auto& [key, value] : keys) {
    if (table.was_set(key) || value == 0) continue;
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", value);
    table.set(key, text, path + " [serving]");
  }
}

}  // namespace

void load_run_config(const std::string& config_path, const std::vector<std::string>& args, RunConfig& config,
                     OptionTable& table) {
  namespace fs = std::filesystem;
  if (!is_file(config_path)) throw ConfigError(config_path + ": cannot open config file");
  std::ifstream in(config_path);
  if (!in) throw ConfigError(config_path + ": cannot open config file");
  std::stringstream text;
  text << in.rdbuf();
  const std::string ini = text.str();
  // [pool.NAME] sections are keys only once named: find the names, bind, parse.
  config.set_pool_names(pool_names(OptionTable::mentioned_keys(args, &ini)));
  config.bind(table);
  table.parse(args, &ini, config_path);
  apply_serving_defaults(config, table);
  for (const PoolConfig& p : config.pools()) {
    if (!table.was_set(p.prefix() + "role"))
      throw ConfigError(config_path + ": " + p.prefix() + "role is required (" + PoolRoleRegistry::instance().names_joined() +
                        ")");
    table.inherit(p.prefix());
  }
  config.config_path = config_path;
  config.validate();
  check_pool_keys(config, table);
  check_ingress_keys(config, table);
  config.warnings = unused_settings(config, table);
}

void print_warnings(const RunConfig& config) {
  for (const std::string& w : config.warnings) std::fprintf(stderr, "testbed: warning: %s\n", w.c_str());
}

}  // namespace testbed
