// testbed run CONFIG.ini [--output DIR] [--section.key=value ...]
// Runs one experiment and writes DIR/results.h5 and DIR/config.ini (the resolved config).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "engine/config_error.h"
#include "engine/driver.h"
#include "engine/metrics/results_file.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "experiments/cli/command.h"
#include "experiments/cli/engine_factory.h"
#include "experiments/cli/progress_printer.h"
#include "experiments/cli/run_config.h"
#include "sim/simulated_driver.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace testbed {
namespace {

void write_text_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw ConfigError(path.string() + ": cannot write");
  }
  fs::rename(tmp, path);
}

void print_run_help() {
  RunConfig config;
  OptionTable table;
  config.bind(table);
  std::cout << "usage: testbed run CONFIG.ini [--output DIR] [--section.key=value ...]\n\n"
               "Runs the experiment CONFIG.ini describes and writes DIR/results.h5 and\n"
               "DIR/config.ini (default DIR: results/<config name>).\n\n"
            << table.description() << "\n";
}

int run_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    print_run_help();
    return args.empty() ? 2 : 0;
  }
  const std::string config_path = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  std::string output_dir;
  po::options_description extra;
  extra.add_options()("output", po::value<std::string>(&output_dir), "results directory");

  RunConfig config;
  OptionTable table;
  po::variables_map vm;
  load_run_config(config_path, rest, config, table, extra, vm);
  if (output_dir.empty()) output_dir = (fs::path("results") / fs::path(config_path).stem()).string();

  RunSetup setup = prepare_run(config);
  std::unique_ptr<Executor> executor = make_executor(config, setup);
  WorkloadContext context;
  context.vocab_size = setup.model.vocab_size;
  context.sampling = config.sampling;
  std::unique_ptr<RequestSource> source = make_workload(config.workload, context);

  RunRecorder recorder(config.output.steps, config.output.tokens);
  Engine engine(0, setup.engine, setup.num_blocks, std::move(executor), &recorder);
  ProgressPrinter printer(config.driver.progress);
  ProgressFn progress = [&](int64_t done, int64_t total) { printer.update(done, total); };

  const std::string mode = config.driver_mode();
  std::printf("testbed run %s: model %s, executor %s, driver %s, %d KV blocks of %d tokens\n", config_path.c_str(),
              setup.model.name.c_str(), engine.executor().name().c_str(), mode.c_str(), setup.num_blocks,
              setup.engine.cache.block_size);
  std::fflush(stdout);
  const auto wall0 = std::chrono::steady_clock::now();
  if (mode == "offline")
    run_offline(engine, *source, progress);
  else if (mode == "realtime")
    run_realtime(engine, *source, progress);
  else
    run_simulated(engine, *source, progress);
  printer.done();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

  Summary summary = summarize(recorder, 1, config.slo);
  fs::create_directories(output_dir);
  const fs::path results_path = fs::path(output_dir) / "results.h5";
  {
    ResultsFile file(results_path.string());
    file.write_requests(recorder.requests());
    if (config.output.steps) file.write_steps(recorder.steps());
    if (config.output.tokens) file.write_tokens(recorder.output_token_ids(), recorder.output_tokens());
    file.write_summary(summary);
    file.write_config(table.resolved());
    file.set_attr("run", "wall_s", wall_s);
    file.set_attr("run", "config_path", config_path);
    file.commit();
  }
  write_text_atomically(fs::path(output_dir) / "config.ini", table.to_ini());
  std::printf("%s", format_summary(summary).c_str());
  std::printf("wall time     %.2f s\nresults       %s\n", wall_s, results_path.string().c_str());
  return 0;
}

}  // namespace

TESTBED_COMMAND("run", "run CONFIG.ini [--output DIR] [--section.key=value ...]",
                "run an experiment; writes DIR/results.h5 and DIR/config.ini", run_command);

}  // namespace testbed
