// testbed profile CONFIG.ini [--output FILE.h5] [--repeats N] [--max-context N] [--section.key=value ...]
// Measures the configured real executor's step time over a grid of batch shapes
// (prefill tokens x decoding sequences x context) and writes the table the
// `profiled` cost model reads (cost_model.kind = profiled, cost_model.profile = FILE.h5).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "engine/common/config_error.h"
#include "experiments/cli/command.h"
#include "experiments/cli/experiment.h"
#include "experiments/cli/huge_pages.h"
#include "experiments/cli/profile_command.h"
#include "experiments/cli/progress_printer.h"
#include "sim/executor_profiler.h"

namespace testbed {

ProfileTable profile_configured_executor(const RunConfig& config, int repeats, int max_context) {
  require(config.executor.kind.name != "sim", "executor.kind", "profile a real executor (cpu or cuda), not 'sim'");
  RunSetup setup = prepare_run(config);
  if (max_context <= 0) max_context = config.workload.max_sequence_tokens();
  if (max_context <= 0) max_context = std::min(setup.engine.max_model_len, 4096);
  ProfileGrid grid = default_profile_grid(setup.engine.scheduler.max_batch_tokens, setup.engine.scheduler.max_num_seqs,
                                          max_context);
  grid.repeats = repeats;
  grid.shared_prefix_tokens = config.engine.cache.prefix_cache ? config.workload.shared_prefix_tokens() : 0;
  setup.num_blocks = std::max(setup.num_blocks, blocks_for_grid(grid, setup.engine.cache.block_size));
  setup.executor.num_blocks = setup.num_blocks;
  std::unique_ptr<Executor> executor = config.executor.kind.create(setup.executor);  // measured, never cost-timed
  ProgressPrinter printer(config.driver.progress);
  ProfileTable table = profile_executor(*executor, grid, setup.engine.cache.block_size, setup.model.vocab_size,
                                        [&](int done, int total) { printer.update(done, total); });
  printer.done();
  table.model = setup.model.name;
  return table;
}

namespace {

int profile_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: testbed profile CONFIG.ini [--output FILE.h5] [--repeats N] [--max-context N] "
                 "[--section.key=value ...]\n\n"
                 "Measures the configured executor (cpu or cuda) over a grid of batch shapes: prefill\n"
                 "tokens up to scheduler.max_batch_tokens, decoding sequences up to scheduler.max_num_seqs,\n"
                 "contexts up to the workload's longest sequence (or --max-context). The table feeds\n"
                 "cost_model.kind = profiled.\n";
    return args.empty() ? 2 : 0;
  }
  std::string output;
  int repeats = 3, max_context = 0;
  RunConfig config;
  OptionTable table;
  table.add_flag("output", &output, "profile table .h5");
  table.add_flag("repeats", &repeats, "runs per grid point (median kept)");
  table.add_flag("max-context", &max_context, "largest context on the grid");
  load_run_config(args[0], {args.begin() + 1, args.end()}, config, table);
  apply_huge_pages(config.driver.huge_pages, /*simulates=*/false);
  print_warnings(config);
  require(repeats >= 1, "--repeats", "must be >= 1");
  if (output.empty()) output = default_output_dir(args[0], table) + "/profile.h5";
  const ProfileTable profile = profile_configured_executor(config, repeats, max_context);
  std::filesystem::create_directories(std::filesystem::path(output).parent_path());
  profile.save(output);
  std::printf("profiled %zu batch shapes of %s on %s: steps from %.2f to %.2f ms\nwrote %s\n", profile.step_s.size(),
              profile.model.c_str(), profile.executor.c_str(),
              1e3 * *std::min_element(profile.step_s.begin(), profile.step_s.end()),
              1e3 * *std::max_element(profile.step_s.begin(), profile.step_s.end()), output.c_str());
  return 0;
}

}  // namespace

TESTBED_COMMAND("profile", "profile CONFIG.ini [--output FILE.h5] [--repeats N] [--max-context N]",
                "measure a real executor's step times for the profiled cost model", profile_command);

}  // namespace testbed
