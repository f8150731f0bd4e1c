// testbed sweep SWEEP.ini [--output DIR] [--jobs N] [--backend local|slurm] [--dry-run] [--section.key=value ...]
#include <cstdio>
#include <iostream>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "experiments/cli/command.h"
#include "experiments/sweep/sweep_backend.h"
#include "experiments/sweep/sweep_file.h"
#include "experiments/sweep/sweep_runner.h"

namespace testbed {
namespace {

const char* kUsage = "sweep SWEEP.ini [--output DIR] [--jobs N] [--backend local|slurm] [--dry-run] [--section.key=value ...]";

void print_sweep_help() {
  OptionTable backends;
  for (const std::string& name : SweepBackendRegistry::instance().names())
    SweepBackendRegistry::instance().make_params("sweep.backend", name)->bind(backends);
  OptionTable search_keys;
  SearchParams search;
  search.bind(search_keys);
  std::cout << "usage: testbed " << kUsage << "\n\n"
            << "Runs every point of SWEEP.ini as its own `testbed run` in DIR/points/<id>/ and merges\n"
               "their /summary metrics into DIR/sweep.h5 and DIR/sweep.csv (default DIR: results/<sweep name>).\n"
               "Points with complete results are skipped, so a sweep resumes where it stopped.\n\n"
               "  --output DIR          results directory\n"
               "  --jobs N              local backend: points at once (default: the cores)\n"
               "  --backend NAME        local | slurm (sbatch job arrays)\n"
               "  --dry-run             list the points, run nothing, write nothing\n"
               "  --section.key=value   set a config key of every point\n\n"
               "[sweep] keys: base = CONFIG.ini; <section.key> = v1, v2, ... | range(START, STOP, STEP) |\n"
               "geometric(START, STOP, FACTOR); zip = KEY, KEY, ...; seeds = derived | shared\n\n"
               "[search] keys:\n"
            << search_keys.help() << "\nbackend keys:\n"
            << backends.help() << "\n";
}

int sweep_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    print_sweep_help();
    return args.empty() ? 2 : 0;
  }
  SweepOptions opt;
  opt.sweep_path = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    // --flag VALUE or --flag=VALUE
    const auto flag_value = [&](const std::string& name, std::string* out) {
      if (a == "--" + name) {
        if (i + 1 >= args.size()) throw ConfigError("command line: --" + name + " needs a value");
        *out = args[++i];
        return true;
      }
      if (a.rfind("--" + name + "=", 0) == 0) {
        *out = a.substr(name.size() + 3);
        return true;
      }
      return false;
    };
    std::string jobs;
    if (flag_value("output", &opt.output_dir) || flag_value("backend", &opt.backend)) continue;
    if (flag_value("jobs", &jobs)) {
      require(parse_value(jobs, opt.jobs) && opt.jobs >= 1, "--jobs", "'" + jobs + "' is not a positive integer");
      opt.jobs_set = true;
      continue;
    }
    if (a == "--dry-run") {
      opt.dry_run = true;
      continue;
    }
    if (a.rfind("--", 0) == 0 && a.find('.') != std::string::npos && a.find('.') < a.find('=')) {
      opt.overrides.push_back(a);
      continue;
    }
    throw ConfigError("command line: unknown option '" + a + "' (testbed sweep --help)");
  }
  return run_sweep(opt);
}

}  // namespace

TESTBED_COMMAND("sweep", kUsage, "run a sweep file's points (local cores or Slurm) and merge them into DIR/sweep.h5",
                sweep_command);

}  // namespace testbed
