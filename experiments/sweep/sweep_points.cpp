#include "experiments/sweep/sweep_points.h"

#include <set>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "experiments/cli/run_config.h"

namespace testbed {

PointResolver::PointResolver(const SweepFile& sweep, std::vector<std::string> overrides)
    : sweep_(sweep), overrides_(std::move(overrides)) {
  std::set<std::string> swept;
  for (const SweepAxis& a : sweep.axes) swept.insert(a.key);
  for (const std::string& o : overrides_) {
    const size_t eq = o.find('=');
    if (o.rfind("--", 0) != 0 || eq == std::string::npos)
      throw ConfigError("command line: '" + o + "': overrides of a sweep are --section.key=value");
    const std::string key = o.substr(2, eq - 2);
    if (swept.count(key)) throw ConfigError("command line: --" + key + " overrides a key the sweep file sweeps");
  }
}

std::vector<std::string> PointResolver::derived_seed_keys() {
  RunConfig config;
  OptionTable table;
  config.bind(table);
  return derived_seed_keys(table);
}

std::vector<std::string> PointResolver::derived_seed_keys(const OptionTable& table) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : table.resolved()) {
    const std::string suffix = ".seed";
    if (key.size() > suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        key != "model.seed")
      keys.push_back(key);
  }
  return keys;
}

SweepPoint PointResolver::resolve(const PointValues& values) const {
  SweepPoint p;
  p.id = point_id(values);
  p.values = values;
  try {
    std::vector<std::string> args = overrides_;
    for (const auto& [k, v] : values) args.push_back("--" + k + "=" + v);
    RunConfig config;
    OptionTable table;
    load_run_config(sweep_.base, args, config, table);
    if (sweep_.seeds == "derived") {
      bool changed = false;
      for (const std::string& key : derived_seed_keys(table)) {  // pools' seed keys too
        bool swept = false;
        for (const auto& kv : values) swept = swept || kv.first == key;
        if (swept) continue;  // a swept seed is the point's own (replicas)
        uint64_t base_seed = 0;
        if (!parse_value(table.value(key), base_seed)) throw ConfigError(key + ": a seed must be a non-negative integer");
        table.set(key, std::to_string(derive_seed(base_seed, key, values)), "sweep (derived seed)");
        changed = true;
      }
      if (changed) config.validate();
    }
    p.ini = table.to_ini();
    p.resolved = table.resolved();
    p.warnings = config.warnings;
  } catch (const ConfigError& e) {
    // Name the sweep file's line when the error is about a swept key.
    const std::string what = e.what();
    for (const SweepAxis& a : sweep_.axes)
      if (what.find(a.key) != std::string::npos)
        throw ConfigError(a.origin + ": point " + describe(values) + ": " + what);
    throw ConfigError(sweep_.path + ": point " + describe(values) + ": " + what);
  }
  return p;
}

}  // namespace testbed
