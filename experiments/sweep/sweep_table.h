// The merged table of a sweep: one row per point, the swept keys as columns,
// then every /summary metric of the point's results file.
//
//   DIR/sweep.h5   /points  id, status (ok | failed), <swept keys>, <metrics>
//                  /search  (searches) one row per grid point: its keys, status,
//                           <search.key> (highest value that held), first_failing, num_probes
//                  /sweep   attributes: sweep_file, base, backend, seeds, overrides, num_points, num_failed
//   DIR/sweep.csv  the /points table; DIR/search.csv the /search table
//
// A key column is numeric when every value is a number, else text; a failed
// point's metrics are NaN (empty in the CSV).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/metrics/results_file.h"
#include "experiments/sweep/sweep_points.h"

namespace testbed {

struct PointRow {
  const SweepPoint* point = nullptr;
  bool ok = false;
  std::vector<ResultsAttr> summary;  // the point's /summary (ok points)
};

struct SearchRow {
  PointValues values;  // the grid point's values
  std::string id;
  std::string status;  // found | below_range | above_range | failed
  double highest_holding = 0, first_failing = 0;
  int num_probes = 0;
};

struct SweepTableInfo {
  std::string sweep_file, base, backend, seeds;
  std::string overrides;  // the command line's --section.key=value for every point, space-separated
  std::vector<std::string> columns;  // key columns, in order (swept keys, then the searched key)
  std::string search_key;            // empty: no search
  std::vector<std::pair<std::string, std::string>> search_attrs;  // metric, target, direction, tolerance
};

// Writes sweep.h5, sweep.csv (and search.csv) from the rows' summaries, each
// to a temporary name first.
void write_sweep_table(const std::string& dir, const SweepTableInfo& info, const std::vector<PointRow>& rows,
                       const std::vector<SearchRow>& search);

}  // namespace testbed
