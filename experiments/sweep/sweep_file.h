// A sweep file: a base config, the values each swept key takes, how the
// lists combine into points, an optional rate search and the backends' keys.
//
//   [sweep]
//   base = orca.ini                                 # relative to this file
//   scheduler.policy = static, fcfs                 # a list
//   workload.rate = range(1, 16, 0.5)               # START, STOP (inclusive), STEP
//   cache.num_blocks = geometric(1024, 65536, 2)    # START, STOP (inclusive), FACTOR
//   zip = scheduler.max_num_seqs, scheduler.max_batch_tokens   # these lists go in step
//   seeds = derived                                 # derived (default) | shared
//
//   [search]                    # optional: per point of the grid, bisect search.key
//   key = workload.rate
//   low = 1
//   high = 64
//   metric = slo_attainment
//   target = 0.9                # the condition: metric >= target (direction = at_least)
//
//   [slurm]                     # keys of the slurm backend (testbed sweep --help)
//   partition = debug
//
// Points are the cartesian product of the lists (zipped lists count as one),
// the first key outermost. Every config key is validated against the run
// schema before anything runs (sweep_points.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/common/params.h"

namespace testbed {

class OptionTable;

// One swept config key and its values, in the order written.
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
  std::string origin;  // "file:line"
};

// A key = value line of a section other than [sweep] ([search], [slurm]).
struct SweepEntry {
  std::string key;  // "section.key"
  std::string value;
  std::string origin;
};

// One condition of a search: a /summary metric against a target.
struct SearchCondition {
  std::string metric;
  double target = 0.0;
  bool at_least = true;  // metric >= target holds (else metric <= target)
  bool holds(double metric_value) const;
  std::string describe() const;  // "slo_attainment >= 0.9"
};

// [search]: bisection for the highest value of `key` at which every condition
// holds. metric, target and direction are lists of equal length (a single
// direction applies to every metric): metric = itl_p99_s, ttft_p50_s /
// target = 0.05, 2 / direction = at_most.
struct SearchParams : ParamsOf<SearchParams> {
  std::string key;                    // the searched config key (e.g. workload.rate)
  double low = 0.0, high = 0.0;       // the bracket; the condition should hold at low and fail at high
  std::string metric;                 // /summary metrics of the run, comma-separated
  std::string target;                 // the values they are compared with, comma-separated
  std::string direction = "at_least";  // at_least (metric >= target holds) | at_most, one or one per metric
  double tolerance = 0.0;             // stop when the bracket is this narrow (0: (high - low) / 32)
  bool integer = false;               // probe whole numbers only (integer keys such as cache.num_blocks)
  void bind(OptionTable& t) override;
  void validate() const override;
  double resolved_tolerance() const { return tolerance > 0 ? tolerance : (high - low) / 32.0; }
  // The conditions; throws ConfigError naming the key when the lists do not parse or match.
  std::vector<SearchCondition> conditions() const;
};

struct SweepFile {
  std::string path;  // the sweep file as given
  std::string base;  // the base config: a path relative to the sweep file, resolved
  std::vector<SweepAxis> axes;
  std::vector<std::vector<std::string>> zips;  // groups of keys whose lists go in step
  std::string seeds = "derived";               // derived | shared
  bool has_search = false;
  std::vector<SweepEntry> search_entries;      // [search], applied to SearchParams
  std::vector<SweepEntry> backend_entries;     // [slurm] and any other backend's section
};

// Reads and checks the form of a sweep file (sections, keys, lists, ranges,
// zips); throws ConfigError naming the file and line. Config keys and values
// are checked later against the run schema (sweep_points.h).
SweepFile read_sweep_file(const std::string& path);

// The values a [sweep] line gives: a comma-separated list (double quotes keep
// commas), range(START, STOP, STEP) or geometric(START, STOP, FACTOR); both
// include STOP when the steps reach it. Throws ConfigError naming `origin`.
// (A value listed twice is refused by read_sweep_file, unless its list is zipped.)
std::vector<std::string> expand_values(const std::string& text, const std::string& origin);

// One point: the swept keys with their values, in axis order.
using PointValues = std::vector<std::pair<std::string, std::string>>;

// The cartesian product of the axes (a zip group is one axis of tuples), the
// first axis outermost.
std::vector<PointValues> expand_grid(const SweepFile& sweep);

// The text a point's id and seeds derive from: "key=value" lines sorted by key,
// so neither the order of axes nor the other values of a list change it.
std::string canonical_values(const PointValues& values);
// A point's directory name: 12 hex digits of a hash of canonical_values.
std::string point_id(const PointValues& values);
// The seed a point runs with for `seed_key`, from the base config's seed and
// the point's values; below 2^31 so that it fits every integer key.
uint64_t derive_seed(uint64_t base_seed, const std::string& seed_key, const PointValues& values);

// "key=value, key=value" for messages and listings.
std::string describe(const PointValues& values);

}  // namespace testbed
