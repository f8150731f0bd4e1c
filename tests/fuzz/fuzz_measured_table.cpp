// A measured serving table (testbed fidelity --measured, testbed calibrate): any bytes as its CSV.
#include "experiments/cli/measured_table.h"
#include "fuzz_target.h"

FUZZ_TARGET(measured_table) {
  const std::string path = testbed_fuzz::write_input(data, size, ".csv");
  testbed_fuzz::expect_config_error_only([&] {
    for (const testbed::MeasuredPoint& p : testbed::read_measured_table(path))
      (void)testbed::measured_point_overrides(p);
  });
  return 0;
}
