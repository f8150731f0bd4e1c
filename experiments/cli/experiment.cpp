#include "experiments/cli/experiment.h"
#include "experiments/cli/huge_pages.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

#include "engine/common/config_error.h"
#include "engine/driver.h"
#include "engine/read_ahead_source.h"
#include "engine/metrics/fleet_metrics.h"
#include "sim/hardware_spec.h"
#include "sim/pool.h"
#include "experiments/cli/progress_printer.h"
#include "experiments/cli/provenance.h"
#include "traces/workload.h"

namespace fs = std::filesystem;

namespace testbed {

StagedText::StagedText(const fs::path& path, const std::string& text)
    : path_(path), tmp_(path.string() + ".tmp") {
  std::ofstream out(tmp_.path());
  out << text;
  if (!out) throw ConfigError(path.string() + ": cannot write");
}

void StagedText::commit() {
  fs::rename(tmp_.path(), path_);
  tmp_.done();
}

void write_text_atomically(const fs::path& path, const std::string& text) { StagedText(path, text).commit(); }

std::string config_hash(const OptionTable& table) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the resolved config as config.ini states it
  for (const unsigned char c : table.to_ini()) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string(hex, 8);
}

std::string default_output_dir(const std::string& config_path, const OptionTable& table) {
  return (fs::path("results") / (fs::path(config_path).stem().string() + "-" + config_hash(table))).string();
}

namespace {

// KEY -> VALUE of a config.ini as to_ini() writes it ([section] then name = value).
std::map<std::string, std::string> read_resolved_ini(const fs::path& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.size() > 2 && line.front() == '[' && line.back() == ']') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq != std::string::npos) out[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return out;
}

}  // namespace

void check_output_dir(const std::string& dir, const OptionTable& table, bool overwrite, const std::string& flag) {
  require_writable_dir(dir, flag);
  if (overwrite || !fs::is_directory(dir) || fs::is_empty(dir)) return;
  const fs::path ini = fs::path(dir) / "config.ini";
  if (!fs::is_regular_file(ini))
    throw ConfigError(flag + ": '" + dir + "' is not empty and holds no run's results (no config.ini); choose another "
                      "directory, or pass --overwrite to write into it");
  // The same resolved config again: the same results (same config and seed), replaced in place.
  const std::map<std::string, std::string> old = read_resolved_ini(ini);
  std::string differ;
  int n = 0;
  for (const auto& [key, value] : table.resolved()) {
    auto it = old.find(key);
    if (it != old.end() && it->second == value) continue;
    if (++n <= 3) differ += (differ.empty() ? "" : ", ") + key + " " + (it == old.end() ? "(absent)" : it->second) + " -> " + value;
  }
  for (const auto& [key, value] : old)
    if (!table.contains(key) && ++n <= 3) differ += (differ.empty() ? "" : ", ") + key + " (no longer a key)";
  if (n == 0) return;
  throw ConfigError(flag + ": '" + dir + "' holds the results of another config (" + differ + (n > 3 ? ", ..." : "") +
                    "; " + std::to_string(n) + " keys differ); pass --overwrite to replace them, or choose another directory");
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(std::move(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {

// Marginal prefill time per token on one instance, asked of the cost model
// (0 when the run has none): (t(2N) - t(N)) / N for an N-token prompt chunk.
double prefill_seconds_per_token(const CostModel* cost_model) {
  if (!cost_model) return 0.0;
  const int n = 1024;
  return std::max(0.0, (cost_model->predict(prefill_shape(2 * n)) - cost_model->predict(prefill_shape(n))) / n);
}

// The pools' sizes, GPUs, capacity, price and power (one pool "main" without [pool.NAME]).
std::vector<PoolFacts> pool_facts(const RunConfig& config, const RunSetup& setup, int num_instances) {
  std::vector<PoolFacts> out;
  const auto facts_of = [](const InstanceSetup& s, PoolFacts& f) {
    f.gpus_per_instance = s.tensor_parallel;
    f.kv_blocks_per_instance = s.num_blocks;
    f.hardware = s.hardware;
    if (!s.hardware.empty()) {
      const HardwareSpec hw = HardwareSpec::from_ini_file(s.hardware);
      f.price_per_gpu_hour = hw.price_per_gpu_hour;
      f.power_w_per_gpu = hw.tdp_w;
    }
  };
  if (config.pools().empty()) {
    PoolFacts f;
    f.size = num_instances;
    facts_of(setup, f);
    out.push_back(f);
    return out;
  }
  int first = 0;
  for (size_t k = 0; k < config.pools().size(); ++k) {
    const PoolConfig& p = config.pools()[k];
    PoolFacts f;
    f.name = p.name;
    f.role = p.role.name;
    f.first_instance = first;
    f.size = p.size;
    facts_of(setup.pools[k], f);
    out.push_back(f);
    first += p.size;
  }
  return out;
}

}  // namespace

void check_conservation(const RunRecorder& rec) {
  const int64_t arrived = rec.num_arrived(), finished = rec.num_finished(), ended = rec.num_cancelled();
  if (arrived != finished + ended)
    throw std::logic_error("internal error: request conservation broken: " + std::to_string(arrived) +
                           " arrived, " + std::to_string(finished) + " finished, " + std::to_string(ended) +
                           " cancelled or lost");
}

ExperimentResult run_experiment(const RunConfig& config, const RunSetup& setup) {
  WorkloadContext context;
  context.vocab_size = setup.model.vocab_size;
  context.sampling = config.sampling;
  // The block size of the engines that take arrivals, when their prefix cache
  // will read the prompts' hashes: generators hash shared parts once.
  const CacheConfig* arrivals_cache = &setup.engine.cache;
  for (size_t i = 0; i < setup.pools.size(); ++i)
    if (config.pools()[i].takes_arrivals()) arrivals_cache = &setup.pools[i].engine.cache;
  context.hash_block_size = arrivals_cache->prefix_cache ? arrivals_cache->block_size : 0;
  std::unique_ptr<RequestSource> source = make_workload(config.workload, context);
  // The front end's time before the engine sees a request: that of the pool taking arrivals.
  double request_s = setup.engine.frontend.request_s;
  for (size_t i = 0; i < setup.pools.size(); ++i)
    if (config.pools()[i].takes_arrivals()) request_s = setup.pools[i].engine.frontend.request_s;
  if (request_s > 0) source = std::make_unique<FrontendSource>(std::move(source), request_s);
  if (config.workload.read_ahead > 0) {
    // Hashed at the same block size (prompts a generator hashed are taken as they are).
    // A fleet on several threads generates ahead on its workers while they wait
    // for a window: a thread of its own would time-slice with them.
    const auto producer = config.simulation().fleet.threads > 1 ? ReadAheadSource::Producer::Idle
                                                                : ReadAheadSource::Producer::Thread;
    source = std::make_unique<ReadAheadSource>(std::move(source), static_cast<size_t>(config.workload.read_ahead),
                                               context.hash_block_size, producer);
  }

  ExperimentResult result;
  result.recorder = std::make_unique<RunRecorder>(config.output.steps, config.output.tokens, config.output.events);
  result.recorder->expect_requests(source->size_hint());
  result.mode = config.driver_mode();
  DriverSetup driver_setup;
  driver_setup.sink = result.recorder.get();
  driver_setup.log_events = config.output.events;
  driver_setup.model = &setup.model;
  driver_setup.tensor_parallel = config.cost_model.tensor_parallel;
  for (const InstanceSetup& pool : setup.pools) driver_setup.pool_models.push_back(&pool.executor.model);
  driver_setup.disaggregated = !config.pools().empty() && result.mode != "simulated";
  driver_setup.semantic_cache = config.semantic_cache;
  std::unique_ptr<Driver> driver = config.resolved_driver().create(driver_setup);
  const EngineFactory make_engine = [&](int instance) {
    advise_heap_growth();  // a large fleet's caches fill gigabytes before its first step
    const InstanceSetup& s = setup.instance(instance);
    std::unique_ptr<Executor> exec = make_executor(config, s);
    if (instance == 0) result.executor = exec->name();
    return std::make_unique<Engine>(instance, s.engine, s.num_blocks, std::move(exec), result.recorder.get());
  };
  ProgressPrinter printer(config.driver.progress);
  const ProgressFn progress = [&](int64_t done, int64_t total) {
    printer.update(done, total);
    advise_heap_growth();  // driver.huge_pages: after every step
  };
  const DriverStats stats = driver->run(make_engine, *source, progress);
  printer.done();
  check_conservation(*result.recorder);
  if (!stats.ingress_s.empty()) result.recorder->set_ingress_seconds(stats.ingress_s);
  result.wall_s = stats.wall_s;
  result.simulated_s = stats.simulated_s;
  result.num_events = stats.num_events;
  const int n = stats.num_instances;
  result.summary = summarize(*result.recorder, n, config.slo);
  FleetCostFacts& facts = result.facts;
  facts.num_instances = n;
  facts.gpus_per_instance = config.cost_model.tensor_parallel;
  facts.flops_per_prompt_token = 2.0 * static_cast<double>(setup.model.num_active_params());
  // Prefill runs on the first pool (the one that takes arrivals).
  facts.prefill_s_per_token = prefill_seconds_per_token(setup.instance(0).cost_model.get());
  facts.requests_per_day = config.requests_per_day;
  facts.pools = pool_facts(config, setup, n);
  add_fleet_metrics(*result.recorder, facts, result.summary);
  result.num_instances = n;
  return result;
}

void require_writable_dir(const std::string& dir, const std::string& flag) {
  // The directory, or the nearest of its parents that exists (the run creates the rest).
  fs::path p = fs::absolute(fs::path(dir)).lexically_normal();
  while (!p.empty() && !fs::exists(p) && p != p.parent_path()) p = p.parent_path();
  if (!fs::is_directory(p))
    throw ConfigError(flag + ": cannot create the directory '" + dir + "': '" + p.string() + "' is not a directory");
  if (::access(p.c_str(), W_OK | X_OK) != 0)
    throw ConfigError(flag + ": cannot write in '" + p.string() + "' (for '" + dir + "')");
}

void write_run_files(const std::string& dir, const RunConfig& config, const OptionTable& table,
                     const ExperimentResult& result, const std::function<void(ResultsFile&)>& extra) {
  fs::create_directories(dir);
  ResultsFile file((fs::path(dir) / "results.h5").string());
  file.write_requests(result.recorder->requests());
  file.write_cancelled(result.recorder->cancelled());
  file.write_autoscale(result.recorder->scale_samples());
  file.write_itl(result.recorder->itl());
  if (config.output.steps) file.write_steps(result.recorder->steps());
  if (config.output.tokens) file.write_tokens(result.recorder->output_token_ids(), result.recorder->output_tokens());
  file.write_summary(result.summary);
  write_fleet_tables(file, *result.recorder, result.facts, result.summary.get("duration_s"));
  if (config.output.events) file.write_events(result.recorder->events());
  file.write_config(table.resolved());
  file.set_attr("run", "wall_s", result.wall_s);
  file.set_attr("run", "simulated_s", result.simulated_s);
  file.set_attr("run", "executor", result.executor);
  file.set_attr("run", "mode", result.mode);
  file.set_attr("run", "config_path", config.config_path);
  write_provenance(file);
  std::string warnings;
  for (const std::string& w : config.warnings) warnings += (warnings.empty() ? "" : "\n") + w;
  file.set_attr("run", "warnings", warnings);  // one per line; "" when none
  file.set_attr("run", "num_warnings", static_cast<double>(config.warnings.size()));
  if (extra) extra(file);
  // Everything is written under temporary names first; then the set replaces
  // the old one. results.h5 marks a complete set: it goes first and comes back
  // last, so a failure in between leaves no results.h5 beside mismatched files.
  const fs::path d(dir);
  StagedText config_ini(d / "config.ini", table.to_ini());
  std::unique_ptr<StagedText> timeline;
  if (config.output.timeline) timeline = std::make_unique<StagedText>(d / "timeline.json", timeline_json(result.recorder->steps()));
  fs::remove(d / "results.h5");
  config_ini.commit();
  if (timeline)
    timeline->commit();
  else
    fs::remove(d / "timeline.json");  // an earlier run's timeline would sit beside results it does not belong to
  file.commit();
}

std::string timeline_json(const std::vector<StepRecord>& steps) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  for (const StepRecord& s : steps) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, \"ts\": %.3f, \"dur\": %.3f, "
                  "\"args\": {\"seqs\": %d, \"prefill_tokens\": %d, \"decode_tokens\": %d, \"kv_blocks_used\": %d, "
                  "\"preempted\": %d, \"waiting\": %d}}",
                  first ? "" : ",\n", s.prefill_tokens > 0 ? (s.decode_tokens > 0 ? "mixed" : "prefill") : "decode",
                  s.instance, s.start_s * 1e6, s.duration_s * 1e6, s.num_seqs, s.prefill_tokens, s.decode_tokens,
                  s.kv_blocks_used, s.num_preempted, s.num_waiting);
    out += buf;
    first = false;
  }
  return out + "\n]}\n";
}

}  // namespace testbed
