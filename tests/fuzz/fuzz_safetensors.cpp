// A safetensors file: any bytes through the header's validation, then every
// tensor read as its dtype says (floats converted, 8-bit and int32 raw).
#include "engine/model/safetensors.h"
#include "fuzz_target.h"

FUZZ_TARGET(safetensors) {
  const std::string path = testbed_fuzz::write_input(data, size, ".safetensors");
  testbed_fuzz::expect_config_error_only([&] {
    const testbed::SafetensorsFile f(path);
    for (const std::string& name : f.names()) {
      const std::string dtype = f.dtype_of(name);
      if (dtype == "F32" || dtype == "F16" || dtype == "BF16")
        (void)f.read(name, f.shape_of(name));
      else
        (void)f.read_raw(name, {dtype}, f.shape_of(name));
    }
  });
  return 0;
}
