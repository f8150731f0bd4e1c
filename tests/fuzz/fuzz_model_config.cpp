// A Hugging Face config.json: any bytes through ModelConfig, then the sizes
// the simulator derives from it (parameter and KV byte counts must not overflow).
#include "engine/model/model_config.h"
#include "fuzz_target.h"

FUZZ_TARGET(model_config) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  testbed_fuzz::expect_config_error_only([&] {
    const testbed::ModelConfig m = testbed::ModelConfig::from_json_text(text, "fuzz.json");
    volatile double sink = m.linear_weight_bytes() + m.other_weight_bytes() +
                           static_cast<double>(m.kv_bytes_per_token(2)) + static_cast<double>(m.num_active_params());
    (void)sink;
  });
  return 0;
}
