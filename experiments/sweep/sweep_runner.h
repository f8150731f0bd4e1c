// `testbed sweep`: reads a sweep file, validates every point, runs the points
// that have no complete results on a backend (a search probes round by round),
// and merges the results into DIR/sweep.h5 and DIR/sweep.csv.
//
//   DIR/sweep.ini               a copy of the sweep file (its base made absolute: it reruns the sweep)
//   DIR/points/<id>/point.ini   the point's resolved config (`testbed run` input)
//   DIR/points/<id>/results.h5  config.ini  log.txt   (the run's own files)
//   DIR/sweep.h5  sweep.csv  [search.csv]             (sweep_table.h)
#pragma once

#include <string>
#include <vector>

namespace testbed {

struct SweepOptions {
  std::string sweep_path;
  std::string output_dir;              // empty: results/<sweep file name>
  std::string backend = "local";
  int jobs = 0;                        // local: 0 = the machine's cores
  bool jobs_set = false;
  bool dry_run = false;
  std::vector<std::string> overrides;  // --section.key=value for every point
  std::string testbed;                 // the executable points run with (empty: this one)
};

// Returns the exit status: 0 when every point completed, 1 when any failed;
// throws ConfigError (exit 2) on bad input before anything is written.
int run_sweep(const SweepOptions& options);

}  // namespace testbed
