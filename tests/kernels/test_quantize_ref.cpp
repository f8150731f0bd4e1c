// GPTQ and AWQ on the CPU (kernels/gemm/quantize_ref.h): on correlated
// calibration inputs GPTQ's layer output error is below RTN's, and on inputs
// with a few large channels AWQ's search improves on RTN; both keep the W4A16
// layout (codes in range, RTN's group scales).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/common/rng.h"
#include "kernels/gemm/quantize_ref.h"

using namespace testbed;

namespace {

// Inputs with correlated channels: x = z L, L a random mixing matrix.
std::vector<float> correlated_inputs(Rng& rng, int samples, int k, double outlier_scale = 1.0, int outliers = 0) {
  std::vector<double> mix(static_cast<size_t>(k) * k);
  for (double& m : mix) m = rng.normal() / std::sqrt(k);
  for (int c = 0; c < k; ++c) mix[static_cast<size_t>(c) * k + c] += 1.0;
  std::vector<float> x(static_cast<size_t>(samples) * k);
  std::vector<double> z(k);
  for (int s = 0; s < samples; ++s) {
    for (double& v : z) v = rng.normal();
    for (int c = 0; c < k; ++c) {
      double acc = 0;
      for (int j = 0; j < k; ++j) acc += z[j] * mix[static_cast<size_t>(j) * k + c];
      x[static_cast<size_t>(s) * k + c] = static_cast<float>(acc * (c < outliers ? outlier_scale : 1.0));
    }
  }
  return x;
}

}  // namespace

TEST_CASE("GPTQ's layer output error is below RTN's on correlated inputs", "[gemm][gptq]") {
  Rng rng(21);
  const int n = 32, k = 256, samples = 512;
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (float& v : w) v = static_cast<float>(rng.normal());
  const std::vector<float> x = correlated_inputs(rng, samples, k);
  for (const int group : {64, 128})
    for (const bool sym : {true, false}) {
      INFO("group " << group << (sym ? " symmetric" : " asymmetric"));
      const W4Weights rtn = quantize_w4_rtn(w.data(), n, k, group, sym);
      const W4Weights gptq = quantize_w4_gptq(w.data(), n, k, x.data(), samples, group, sym);
      CHECK(gptq.scales == rtn.scales);  // static groups: the layout and scales are RTN's
      const double e_rtn = layer_output_error(w.data(), dequantize_w4(rtn), n, k, x.data(), samples);
      const double e_gptq = layer_output_error(w.data(), dequantize_w4(gptq), n, k, x.data(), samples);
      INFO("RTN " << e_rtn << ", GPTQ " << e_gptq);
      CHECK(e_gptq < 0.9 * e_rtn);
    }
  CHECK_THROWS_AS(quantize_w4_gptq(w.data(), n, 100, x.data(), samples, 128, true), std::invalid_argument);
}

TEST_CASE("AWQ's scale search improves on RTN when a few channels carry large activations", "[gemm][awq]") {
  Rng rng(22);
  const int n = 32, k = 256, samples = 256;
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (float& v : w) v = static_cast<float>(rng.normal());
  const std::vector<float> x = correlated_inputs(rng, samples, k, 20.0, 8);  // 8 channels 20x larger
  const W4Weights rtn = quantize_w4_rtn(w.data(), n, k, 128, false);
  const AwqResult awq = quantize_w4_awq(w.data(), n, k, x.data(), samples, 128, false);
  const double e_rtn = layer_output_error(w.data(), dequantize_w4(rtn), n, k, x.data(), samples);
  const double e_awq =
      layer_output_error(w.data(), dequantize_w4(awq.weights), n, k, x.data(), samples, &awq.input_scale);
  INFO("RTN " << e_rtn << ", AWQ " << e_awq << " at alpha " << awq.alpha);
  CHECK(awq.alpha > 0);
  CHECK(e_awq < 0.9 * e_rtn);
  REQUIRE(awq.input_scale.size() == static_cast<size_t>(k));
  CHECK(awq.input_scale[0] > awq.input_scale[k - 1]);  // the large channels are scaled up
}
