// The points of a sweep as runnable configs: each point is the base config,
// the command line's overrides and the point's values, resolved and validated
// against the run schema (RunConfig) exactly as `testbed run` would, with its
// seeds derived from the base seeds and the point's values.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "experiments/sweep/sweep_file.h"
#include "engine/common/option_table.h"

namespace testbed {

struct SweepPoint {
  std::string id;      // point_id(values): the directory under DIR/points/
  PointValues values;  // the swept keys (and, for a search probe, the searched key)
  std::string ini;     // the resolved config as INI text (what the point runs)
  std::vector<std::pair<std::string, std::string>> resolved;  // the same, key -> value
  std::vector<std::string> warnings;  // its config's (RunConfig::warnings): unused keys, contradictions
};

class PointResolver {
 public:
  // `overrides` are --section.key=value arguments applied to every point; a
  // key both overridden and swept is a ConfigError.
  PointResolver(const SweepFile& sweep, std::vector<std::string> overrides);

  // Throws ConfigError "<sweep file>: point <values>: <what>" when the point's
  // config is not valid.
  SweepPoint resolve(const PointValues& values) const;

  // The seed keys a derived-seeds sweep varies: every *.seed key of the run
  // schema except model.seed (which picks the dummy weights, i.e. the model).
  static std::vector<std::string> derived_seed_keys();
  // The same keys of a loaded config's table (pool.NAME.*.seed included).
  static std::vector<std::string> derived_seed_keys(const OptionTable& table);

 private:
  const SweepFile& sweep_;
  std::vector<std::string> overrides_;
};

}  // namespace testbed
