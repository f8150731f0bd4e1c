// A run config: any bytes as an INI file through load_run_config (the INI
// reader, every key's conversion, every component's validation).
#include "experiments/cli/run_config.h"
#include "fuzz_target.h"

FUZZ_TARGET(ini) {
  const std::string path = testbed_fuzz::write_input(data, size, ".ini");
  testbed_fuzz::expect_config_error_only([&] {
    testbed::RunConfig config;
    testbed::OptionTable table;
    testbed::load_run_config(path, {}, config, table);
    (void)table.to_ini();
  });
  return 0;
}
