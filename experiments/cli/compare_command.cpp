// testbed compare RUN RUN [RUN ...] [--all]
// Prints several runs' summary metrics side by side (a run is a results
// directory or its results.h5), then the config keys in which they differ.
// Without --all, the latency, throughput, hit-rate and cost metrics that at
// least one run has; with --all, every /summary key of any run.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/common/config_error.h"
#include "engine/metrics/results_file.h"
#include "experiments/cli/command.h"

namespace testbed {
namespace {

namespace fs = std::filesystem;

const char* kUsage = "compare RUN RUN [RUN ...] [--all]";

// The metrics shown without --all, in this order.
const std::vector<std::string> kMain = {
    "num_requests", "num_finished", "num_cancelled", "num_rejected", "duration_s",
    "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_p99_s", "e2e_p50_s", "e2e_p99_s",
    "throughput_tok_s", "request_throughput_rps", "goodput_rps", "slo_attainment", "prefix_hit_rate",
    "ingress_exact_hit_rate", "ingress_semantic_hit_rate", "ingress_false_hit_rate", "quality_failure_rate",
    "preemptions", "batch_size_mean", "replicas_mean", "gpu_seconds", "busy_gpu_seconds", "cost_usd", "usd_per_request"};

struct Run {
  std::string label, path;
  std::map<std::string, double> summary;
  std::vector<std::string> summary_order;
  std::map<std::string, std::string> config;
};

Run load(const std::string& arg) {
  Run r;
  r.label = arg;
  r.path = fs::is_directory(arg) ? (fs::path(arg) / "results.h5").string() : arg;
  if (!fs::is_regular_file(r.path)) throw ConfigError(r.path + ": no results file (give a run directory or its results.h5)");
  const auto groups = read_results_attrs(r.path, std::vector<std::string>{"summary", "config"});
  for (const ResultsAttr& a : groups[0])
    if (!a.is_text) {
      r.summary[a.name] = a.number;
      r.summary_order.push_back(a.name);
    }
  for (const ResultsAttr& a : groups[1]) r.config[a.name] = a.is_text ? a.text : std::to_string(a.number);
  return r;
}

std::string cell(const std::map<std::string, double>& s, const std::string& key) {
  const auto it = s.find(key);
  if (it == s.end()) return "-";
  char buf[64];
  const double v = it->second;
  if (std::isnan(v)) return "nan";
  if (v != 0 && (std::abs(v) >= 1e6 || std::abs(v) < 1e-3))
    std::snprintf(buf, sizeof buf, "%.4g", v);
  else if (v == std::floor(v) && std::abs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

int compare_command(const std::vector<std::string>& args) {
  bool all = false;
  std::vector<std::string> paths;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::printf("usage: testbed %s\n\nPrints the runs' summary metrics side by side, then the config keys whose\n"
                  "values differ between them. RUN is a results directory or a results.h5.\n"
                  "--all prints every /summary key instead of the main ones.\n",
                  kUsage);
      return 0;
    }
    if (a == "--all")
      all = true;
    else if (a.rfind("--", 0) == 0)
      throw ConfigError("compare: unknown flag '" + a + "' (known: --all)");
    else
      paths.push_back(a);
  }
  if (paths.size() < 2) throw ConfigError("compare: give at least two runs (usage: testbed " + std::string(kUsage) + ")");
  std::vector<Run> runs;
  for (const std::string& p : paths) runs.push_back(load(p));

  std::vector<std::string> keys;
  std::set<std::string> seen;
  if (all) {
    for (const Run& r : runs)
      for (const std::string& k : r.summary_order)
        if (seen.insert(k).second) keys.push_back(k);
  } else {
    for (const std::string& k : kMain)
      for (const Run& r : runs)
        if (r.summary.count(k) && seen.insert(k).second) keys.push_back(k);
  }
  std::printf("| metric |");
  for (size_t i = 0; i < runs.size(); ++i) std::printf(" [%zu] |", i + 1);
  std::printf("\n| --- |");
  for (size_t i = 0; i < runs.size(); ++i) std::printf(" --- |");
  std::printf("\n");
  for (const std::string& k : keys) {
    std::printf("| %s |", k.c_str());
    for (const Run& r : runs) std::printf(" %s |", cell(r.summary, k).c_str());
    std::printf("\n");
  }
  std::printf("\n");
  for (size_t i = 0; i < runs.size(); ++i) std::printf("[%zu] %s\n", i + 1, runs[i].path.c_str());

  // Config keys whose values differ (or that some runs lack).
  std::set<std::string> config_keys;
  for (const Run& r : runs)
    for (const auto& [k, v] : r.config) config_keys.insert(k);
  std::vector<std::string> differ;
  for (const std::string& k : config_keys) {
    const auto value = [&](const Run& r) {
      const auto it = r.config.find(k);
      return it == r.config.end() ? std::string("(unset)") : it->second;
    };
    for (const Run& r : runs)
      if (value(r) != value(runs[0])) {
        differ.push_back(k);
        break;
      }
  }
  std::printf("\n");
  if (differ.empty()) {
    std::printf("no config key differs\n");
    return 0;
  }
  std::printf("| config key |");
  for (size_t i = 0; i < runs.size(); ++i) std::printf(" [%zu] |", i + 1);
  std::printf("\n| --- |");
  for (size_t i = 0; i < runs.size(); ++i) std::printf(" --- |");
  std::printf("\n");
  for (const std::string& k : differ) {
    std::printf("| %s |", k.c_str());
    for (const Run& r : runs) {
      const auto it = r.config.find(k);
      std::printf(" %s |", it == r.config.end() ? "(unset)" : it->second.c_str());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

TESTBED_COMMAND("compare", kUsage, "several runs' summary metrics side by side, and the config keys they differ in",
                compare_command);

}  // namespace testbed
