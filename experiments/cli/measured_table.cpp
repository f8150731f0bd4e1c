#include "experiments/cli/measured_table.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "engine/common/config_error.h"
#include "experiments/cli/experiment.h"
#include "traces/csv_fields.h"
#include "traces/trace_format.h"

namespace testbed {

int MeasuredPoint::num_requests() const { return static_cast<int>(std::llround(rate * duration_s)); }

std::vector<MeasuredPoint> read_measured_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open the measured table");
  std::string line;
  int lineno = 0;
  std::vector<std::string> header_text;
  std::vector<std::string_view> header;
  std::vector<MeasuredPoint> points;
  auto where = [&] { return path + ":" + std::to_string(lineno) + ": "; };
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    try {
      const std::vector<std::string_view> fields = split_csv(line);
      if (header.empty()) {
        header_text.assign(fields.begin(), fields.end());
        header.assign(header_text.begin(), header_text.end());
        for (const char* need : {"point", "groups", "users_per_group", "system_prompt_tokens", "prompt_tokens",
                                 "output_tokens", "rate", "duration_s"})
          csv_column(header, need);
        continue;
      }
      if (fields.size() != header.size())
        throw ConfigError(where() + std::to_string(fields.size()) + " fields, the header has " +
                          std::to_string(header.size()));
      auto field = [&](const char* name) { return fields[csv_column(header, name)]; };
      auto positive_int = [&](const char* name) {
        const int64_t v = parse_int_field(field(name), name);
        if (v <= 0 || v > (int64_t{1} << 24)) throw ConfigError(where() + name + ": must be in [1, 2^24]");
        return static_cast<int>(v);
      };
      MeasuredPoint p;
      p.name = std::string(field("point"));
      if (p.name.empty()) throw ConfigError(where() + "point: empty name");
      p.groups = positive_int("groups");
      p.users_per_group = positive_int("users_per_group");
      p.system_prompt_tokens = positive_int("system_prompt_tokens");
      p.prompt_tokens = positive_int("prompt_tokens");
      p.output_tokens = positive_int("output_tokens");
      if (p.system_prompt_tokens > p.prompt_tokens)
        throw ConfigError(where() + "system_prompt_tokens: more than prompt_tokens");
      p.rate = parse_double_field(field("rate"), "rate");
      p.duration_s = parse_double_field(field("duration_s"), "duration_s");
      if (!(p.rate > 0) || !(p.duration_s > 0) || p.rate * p.duration_s > 1e8 || p.num_requests() < 1)
        throw ConfigError(where() + "rate, duration_s: must be positive, with 1 .. 1e8 requests in all");
      for (size_t m = 0; m < kMeasuredMetrics.size(); ++m) {
        p.values[m] = std::numeric_limits<double>::quiet_NaN();
        const char* col = kMeasuredMetrics[m].column;
        bool present = false;
        for (const auto& h : header) present |= h == col;
        if (!present || field(col).empty()) continue;
        const double v = parse_double_field(field(col), col);
        if (!(v > 0) || !std::isfinite(v)) throw ConfigError(where() + col + ": must be positive");
        p.values[m] = v * kMeasuredMetrics[m].scale;
      }
      points.push_back(std::move(p));
    } catch (const TraceParseError& e) {
      throw ConfigError(where() + e.what());
    }
  }
  if (header.empty()) throw ConfigError(path + ": no header row");
  if (points.empty()) throw ConfigError(path + ": no measured point");
  return points;
}

std::vector<std::string> measured_point_overrides(const MeasuredPoint& p) {
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.17g", p.rate);
  return {"--workload.kind=llmd",
          "--workload.num_customers=" + std::to_string(p.groups),
          "--workload.users_per_customer=" + std::to_string(p.users_per_group),
          "--workload.prefix_tokens=" + std::to_string(p.system_prompt_tokens),
          "--workload.user_context_tokens=" + std::to_string(p.prompt_tokens - p.system_prompt_tokens),
          "--workload.query_tokens=0",
          "--workload.output_tokens=" + std::to_string(p.output_tokens),
          "--workload.rate=" + std::string(rate),
          "--workload.num_requests=" + std::to_string(p.num_requests())};
}

Summary simulate_measured_point(const std::string& config_path, const std::vector<std::string>& args,
                                const MeasuredPoint& p, const std::string& output_dir) {
  RunConfig config;
  OptionTable table;
  std::string ignored_output, ignored_measured;
  table.add_flag("output", &ignored_output, "results directory");
  table.add_flag("measured", &ignored_measured, "measured serving points (CSV)");
  std::vector<std::string> point_args = args;
  const std::vector<std::string> workload = measured_point_overrides(p);
  point_args.insert(point_args.end(), workload.begin(), workload.end());
  load_run_config(config_path, point_args, config, table);
  require(config.executor.kind.name == "sim" && config.driver_mode() == "simulated", "executor.kind",
          "measured points are simulated: the config needs executor.kind = sim and driver.mode = simulated");
  const RunSetup setup = prepare_run(config);
  const ExperimentResult r = run_experiment(config, setup);
  if (!output_dir.empty()) write_run_files(output_dir, config, table, r);
  return r.summary;
}

}  // namespace testbed
