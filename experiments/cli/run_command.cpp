// testbed run CONFIG.ini [--output DIR] [--section.key=value ...]
// Runs one experiment and writes DIR/results.h5 and DIR/config.ini (the resolved config).
#include <cstdio>
#include <iostream>

#include "experiments/cli/command.h"
#include "experiments/cli/experiment.h"
#include "experiments/cli/huge_pages.h"

namespace testbed {
namespace {

void print_run_help() {
  RunConfig config;
  OptionTable table;
  config.bind(table);
  std::cout << "usage: testbed run CONFIG.ini [--output DIR] [--overwrite] [--section.key=value ...]\n\n"
               "Runs the experiment CONFIG.ini describes and writes DIR/results.h5 and\n"
               "DIR/config.ini (default DIR: results/<config name>-<hash of the resolved config>).\n"
               "A DIR holding another config's results is refused unless --overwrite.\n\n"
               "Config keys ([section] key = value in the INI file, or --section.key=value):\n"
            << table.help()
            << "\nPools ([pool.NAME] sections, sim/pool.h): pool.NAME.role (unified | prefill | decode) and\n"
               "pool.NAME.size are required; pool.NAME.<any scheduler.*, cache.*, cost_model.*, router.* or\n"
               "link.* key> overrides the top-level key for that pool (e.g. --pool.decode.router.type=least_loaded).\n";
}

int run_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    print_run_help();
    return args.empty() ? 2 : 0;
  }
  const std::string config_path = args[0];
  std::string output_dir;
  bool overwrite = false;
  RunConfig config;
  OptionTable table;
  table.add_flag("output", &output_dir, "results directory");
  table.add_flag("overwrite", &overwrite, "replace the results of another config in --output");
  load_run_config(config_path, {args.begin() + 1, args.end()}, config, table);
  apply_huge_pages(config.driver.huge_pages, /*simulates=*/config.driver_mode() == "simulated");
  print_warnings(config);
  if (output_dir.empty()) output_dir = default_output_dir(config_path, table);
  check_output_dir(output_dir, table, overwrite);  // before the run, not after it

  const RunSetup setup = prepare_run(config);
  std::string capacity = std::to_string(setup.num_blocks) + " KV blocks of " + std::to_string(setup.engine.cache.block_size) +
                         " tokens";
  if (!config.pools().empty()) {  // each pool's own (its model, hardware and TP may differ)
    capacity.clear();
    for (size_t k = 0; k < config.pools().size(); ++k) {
      const InstanceSetup& p = setup.pools[k];
      capacity += (k ? ", " : "") + config.pools()[k].name + ": " + p.executor.model.name + ", " +
                  std::to_string(p.num_blocks) + " KV blocks of " + std::to_string(p.engine.cache.block_size);
    }
  }
  std::printf("testbed run %s: model %s, executor %s, driver %s, %s\n", config_path.c_str(), setup.model.name.c_str(),
              config.executor.kind.name.c_str(), config.driver_mode().c_str(), capacity.c_str());
  std::fflush(stdout);
  const ExperimentResult result = run_experiment(config, setup);
  write_run_files(output_dir, config, table, result);
  std::printf("%s", format_summary(result.summary).c_str());
  if (result.mode == "simulated")
    std::printf("simulated     %.1f s in %.2f s wall (%.0f requests/s, %.2f M events/s)\n", result.simulated_s,
                result.wall_s, result.summary.get("num_finished") / result.wall_s, result.num_events / result.wall_s / 1e6);
  else
    std::printf("wall time     %.2f s\n", result.wall_s);
  std::printf("results       %s/results.h5\n", output_dir.c_str());
  return 0;
}

}  // namespace

TESTBED_COMMAND("run", "run CONFIG.ini [--output DIR] [--section.key=value ...]",
                "run an experiment; writes DIR/results.h5 and DIR/config.ini", run_command);

}  // namespace testbed
