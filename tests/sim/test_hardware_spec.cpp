// Hardware spec cost and power keys: the shipped specs carry a price per GPU-hour
// and a TDP (for equal-cost / equal-power comparisons), both are optional (0 when
// omitted: unknown), and bad values are ConfigErrors that name the key.
//   ./build/tests/test_sim "[hardware_spec]"   (from the repository root)
#include <catch2/catch.hpp>
#include <limits>
#include <string>

#include "engine/common/config_error.h"
#include "sim/hardware_spec.h"

using namespace testbed;

namespace {

const char* kMinimalSpec =
    "[device]\nname = test-gpu\n"
    "[compute]\nbf16_tflops = 1000\n"
    "[memory]\ncapacity_gib = 80\nbandwidth_gbps = 2000\n";

// The message of the ConfigError parsing `text` throws ("" if none).
std::string error_for(const std::string& text) {
  try {
    HardwareSpec::from_ini_text(text, "bad.ini");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("hardware spec shipped files carry price and power", "[hardware_spec]") {
  const HardwareSpec h100 = HardwareSpec::from_ini_file("experiments/hardware/h100-sxm.ini");
  const HardwareSpec h200 = HardwareSpec::from_ini_file("experiments/hardware/h200.ini");
  const HardwareSpec a100 = HardwareSpec::from_ini_file("experiments/hardware/a100-80gb.ini");
  CHECK(h100.price_per_gpu_hour == 4.916);
  CHECK(h200.price_per_gpu_hour == 5.408);
  CHECK(a100.price_per_gpu_hour == 1.844);
  CHECK(h100.tdp_w == 700);
  CHECK(h200.tdp_w == 700);
  CHECK(a100.tdp_w == 400);
}

TEST_CASE("hardware spec price and power default to 0 when omitted", "[hardware_spec]") {
  const HardwareSpec hw = HardwareSpec::from_ini_text(kMinimalSpec, "gpu.ini");
  CHECK(hw.price_per_gpu_hour == 0);
  CHECK(hw.tdp_w == 0);
  const HardwareSpec built_in_code;
  CHECK(built_in_code.price_per_gpu_hour == 0);
  CHECK(built_in_code.tdp_w == 0);
  // 0 is accepted when written explicitly, too.
  const HardwareSpec zeros = HardwareSpec::from_ini_text(
      std::string(kMinimalSpec) + "[cost]\nprice_per_gpu_hour_usd = 0\n[power]\ntdp_w = 0\n", "gpu.ini");
  CHECK(zeros.price_per_gpu_hour == 0);
  CHECK(zeros.tdp_w == 0);
}

TEST_CASE("hardware spec negative price or power is an error naming the key", "[hardware_spec]") {
  const std::string price = error_for(std::string(kMinimalSpec) + "[cost]\nprice_per_gpu_hour_usd = -1\n");
  CHECK(price.find("bad.ini: ") == 0);
  CHECK(price.find("cost.price_per_gpu_hour_usd") != std::string::npos);
  const std::string power = error_for(std::string(kMinimalSpec) + "[power]\ntdp_w = -700\n");
  CHECK(power.find("bad.ini: ") == 0);
  CHECK(power.find("power.tdp_w") != std::string::npos);
  // Not a number at all: the parser names the key.
  CHECK(error_for(std::string(kMinimalSpec) + "[power]\ntdp_w = 700W\n").find("power.tdp_w") != std::string::npos);

  // validate() on a spec built in code: non-finite values are rejected as well.
  HardwareSpec hw = HardwareSpec::from_ini_text(kMinimalSpec, "gpu.ini");
  hw.price_per_gpu_hour = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(hw.validate(), Catch::StartsWith("cost.price_per_gpu_hour_usd: "));
  hw.price_per_gpu_hour = 1;
  hw.tdp_w = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(hw.validate(), Catch::StartsWith("power.tdp_w: "));
  hw.tdp_w = -1;
  CHECK_THROWS_AS(hw.validate(), ConfigError);
  hw.tdp_w = 700;
  CHECK_NOTHROW(hw.validate());
}
