// A hardware spec: any bytes as its INI text.
#include "fuzz_target.h"
#include "sim/hardware_spec.h"

FUZZ_TARGET(hardware_spec) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  testbed_fuzz::expect_config_error_only([&] {
    const testbed::HardwareSpec hw = testbed::HardwareSpec::from_ini_text(text, "fuzz.ini");
    (void)hw.to_ini();
  });
  return 0;
}
