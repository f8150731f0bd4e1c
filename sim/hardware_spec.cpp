// Parses and checks hardware spec INI files; see sim/hardware_spec.h for the keys.
#include "sim/hardware_spec.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {
namespace {

// Every key the file may hold, bound to its field. Keys without a default are
// required: a spec that silently fell back to 0 FLOP/s would be worse than an error.
void bind_spec(OptionTable& t, HardwareSpec& s) {
  t.add("device.name", &s.name, "device name for reports");
  t.add_required("compute.bf16_tflops", &s.bf16_tflops, "dense bf16 peak, TFLOP/s");
  t.add("compute.fp16_tflops", &s.fp16_tflops, "dense fp16 peak, TFLOP/s");
  t.add("compute.fp8_tflops", &s.fp8_tflops, "dense fp8 peak, TFLOP/s");
  t.add("compute.int8_tops", &s.int8_tops, "dense int8 peak, TOP/s");
  t.add("compute.tf32_tflops", &s.tf32_tflops, "dense tf32 peak, TFLOP/s");
  t.add("compute.fp32_tflops", &s.fp32_tflops, "fp32 peak (CUDA cores), TFLOP/s");
  t.add("compute.efficiency", &s.compute_efficiency, "achieved / peak for GEMMs");
  t.add("compute.attention_efficiency", &s.attention_efficiency, "achieved / peak for attention");
  t.add("compute.gemm_tile_n", &s.gemm_tile_n, "GEMM tile width: MoE expert GEMMs round up to it (0: no rounding)");
  t.add("compute.overlap_exponent", &s.overlap_exponent,
        "weight GEMM time = (compute^p + memory^p)^(1/p); 0 = max(compute, memory)");
  t.add_required("memory.capacity_gib", &s.memory_gib, "device memory, GiB");
  t.add_required("memory.bandwidth_gbps", &s.bandwidth_gbps, "HBM peak, GB/s");
  t.add("memory.efficiency", &s.memory_efficiency, "achieved / peak for streaming reads");
  t.add("memory.reserve_gib", &s.reserve_gib, "per-GPU activations, workspaces, CUDA graphs");
  t.add("memory.kv_read_efficiency", &s.kv_read_efficiency,
        "achieved / peak for attention reading paged K/V (0: memory.efficiency)");
  t.add("interconnect.bandwidth_gbps", &s.link_gbps, "per GPU, one direction, GB/s");
  t.add("interconnect.efficiency", &s.link_efficiency, "achieved all-reduce bus bandwidth / link");
  t.add("interconnect.latency_s", &s.link_latency_s, "fixed cost of one small all-reduce");
  t.add("step.overhead_s", &s.step_overhead_s, "host scheduling + launch per engine step");
  t.add("step.layer_overhead_s", &s.layer_overhead_s, "fixed device seconds per decoder layer per step");
  const char* degrees[] = {"tp2", "tp4", "tp8"};
  for (int i = 0; i < 3; ++i) {
    t.add(std::string("all_reduce.") + degrees[i] + "_latency_s", &s.all_reduce_latency_s[i],
          "measured all-reduce latency at this TP degree (0: interconnect.*)");
    t.add(std::string("all_reduce.") + degrees[i] + "_bus_gbps", &s.all_reduce_bus_gbps[i],
          "measured all-reduce bus bandwidth at this TP degree, GB/s (0: interconnect.*)");
  }
  t.add("cost.price_per_gpu_hour_usd", &s.price_per_gpu_hour, "rental price, USD per GPU-hour (0: unknown)");
  t.add("power.tdp_w", &s.tdp_w, "board thermal design power, W (0: unknown)");
  t.add("serving.request_s", &s.serving_request_s, "front end: seconds before the engine sees a request");
  t.add("serving.output_lag_steps", &s.serving_output_lag_steps, "front end: a token's visibility lag, in steps");
  t.add("serving.output_s", &s.serving_output_s, "front end: seconds from visibility to the client");
}

// Far above any device's figure (in TFLOP/s, GiB, GB/s, s, USD or W) and far
// below where multiplying by 1e12 or 2^30 leaves the doubles' range.
constexpr double kMaxValue = 1e12;

std::string value_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

void require_finite_at_least(double v, double lo, const std::string& key) {
  require(std::isfinite(v) && v >= lo && v <= kMaxValue, key,
          value_text(v) + " is not a finite number in [" + value_text(lo) + ", 1e12]");
}

// Capacities, bandwidths and peaks the model divides by: finite, > 0 and plausible.
void require_positive(double v, const std::string& key) {
  require(std::isfinite(v) && v > 0 && v <= kMaxValue, key, value_text(v) + " must be positive (and at most 1e12)");
}

void require_fraction(double v, const std::string& key) {
  require(std::isfinite(v) && v > 0 && v <= 1, key, "must be in (0, 1]");
}

}  // namespace

HardwareSpec HardwareSpec::from_ini_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))  // a directory or a FIFO would read as empty or block
    throw ConfigError(path + ": cannot open hardware spec" +
                      (std::filesystem::exists(path, ec) ? " (not a regular file)" : ""));
  if (std::filesystem::file_size(path, ec) > (uintmax_t{16} << 20))
    throw ConfigError(path + ": a hardware spec of more than 16 MiB is not a hardware spec");
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open hardware spec");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": cannot read hardware spec");
  return from_ini_text(text.str(), path);
}

std::string HardwareSpec::to_ini() const {
  HardwareSpec copy = *this;
  OptionTable table;
  bind_spec(table, copy);
  return table.to_ini();
}

HardwareSpec HardwareSpec::from_ini_text(const std::string& text, const std::string& origin) {
  HardwareSpec s;
  s.origin = origin;
  OptionTable table;
  bind_spec(table, s);
  table.parse({}, &text, origin);  // errors name the file and the key
  try {
    s.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(origin + ": " + e.what());
  }
  return s;
}

void HardwareSpec::validate() const {
  require_positive(bf16_tflops, "compute.bf16_tflops");
  require_finite_at_least(fp16_tflops, 0, "compute.fp16_tflops");
  require_finite_at_least(fp8_tflops, 0, "compute.fp8_tflops");
  require_finite_at_least(int8_tops, 0, "compute.int8_tops");
  require_finite_at_least(tf32_tflops, 0, "compute.tf32_tflops");
  require_finite_at_least(fp32_tflops, 0, "compute.fp32_tflops");
  require_fraction(compute_efficiency, "compute.efficiency");
  require_fraction(attention_efficiency, "compute.attention_efficiency");
  require_positive(memory_gib, "memory.capacity_gib");
  require_positive(bandwidth_gbps, "memory.bandwidth_gbps");
  require_fraction(memory_efficiency, "memory.efficiency");
  require_finite_at_least(reserve_gib, 0, "memory.reserve_gib");
  require(kv_read_efficiency == 0 || (std::isfinite(kv_read_efficiency) && kv_read_efficiency > 0 && kv_read_efficiency <= 1),
          "memory.kv_read_efficiency", "must be 0 (memory.efficiency) or in (0, 1]");
  require(reserve_gib < memory_gib, "memory.reserve_gib", "must be less than memory.capacity_gib");
  require_finite_at_least(link_gbps, 0, "interconnect.bandwidth_gbps");
  require_fraction(link_efficiency, "interconnect.efficiency");
  require_finite_at_least(link_latency_s, 0, "interconnect.latency_s");
  require_finite_at_least(step_overhead_s, 0, "step.overhead_s");
  require_finite_at_least(layer_overhead_s, 0, "step.layer_overhead_s");
  require(gemm_tile_n == 0 || (std::isfinite(gemm_tile_n) && gemm_tile_n >= 1 && gemm_tile_n <= 4096),
          "compute.gemm_tile_n", "must be 0 (no rounding) or in [1, 4096]");
  require(overlap_exponent == 0 || (std::isfinite(overlap_exponent) && overlap_exponent >= 1 && overlap_exponent <= 64),
          "compute.overlap_exponent", "must be 0 (max) or in [1, 64]");
  const char* degrees[] = {"tp2", "tp4", "tp8"};
  for (int i = 0; i < 3; ++i) {
    const std::string k = std::string("all_reduce.") + degrees[i];
    require_finite_at_least(all_reduce_latency_s[i], 0, k + "_latency_s");
    require_finite_at_least(all_reduce_bus_gbps[i], 0, k + "_bus_gbps");
    require((all_reduce_latency_s[i] > 0) == (all_reduce_bus_gbps[i] > 0), k + "_bus_gbps",
            "give both " + k + "_latency_s and " + k + "_bus_gbps, or neither");
  }
  require_finite_at_least(price_per_gpu_hour, 0, "cost.price_per_gpu_hour_usd");
  require_finite_at_least(tdp_w, 0, "power.tdp_w");
  require_finite_at_least(serving_request_s, 0, "serving.request_s");
  require(std::isfinite(serving_output_lag_steps) && serving_output_lag_steps >= 0 && serving_output_lag_steps <= 16,
          "serving.output_lag_steps", "must be in [0, 16]");
  require_finite_at_least(serving_output_s, 0, "serving.output_s");
}

double HardwareSpec::matmul_flops(const std::string& torch_dtype) const {
  const std::string where = name.empty() ? origin : name;
  auto peak = [&](double tflops, const char* key) {
    require(tflops > 0, key, "'" + where + "' gives no peak for " + torch_dtype + " (the model's torch_dtype)");
    return tflops * 1e12 * compute_efficiency;
  };
  if (torch_dtype == "bfloat16") return peak(bf16_tflops, "compute.bf16_tflops");
  if (torch_dtype == "float16") return peak(fp16_tflops, "compute.fp16_tflops");
  // float32 checkpoints: PyTorch computes float32 matmuls on CUDA cores unless TF32
  // is enabled (torch.backends.cuda.matmul.allow_tf32 defaults to False since 1.12).
  if (torch_dtype == "float32") return peak(fp32_tflops, "compute.fp32_tflops");
  if (torch_dtype == "float8_e4m3fn")
    return fp8_tflops > 0 ? peak(fp8_tflops, "compute.fp8_tflops") : peak(bf16_tflops, "compute.bf16_tflops");
  if (torch_dtype == "int8")
    return int8_tops > 0 ? peak(int8_tops, "compute.int8_tops") : peak(bf16_tflops, "compute.bf16_tflops");
  throw ConfigError("model.torch_dtype: '" + torch_dtype + "' has no compute peak in the hardware spec");
}

double HardwareSpec::attention_flops(const std::string& torch_dtype) const {
  // Attention runs on the activation dtype: 16-bit for 8-bit checkpoints.
  const bool eight_bit = torch_dtype == "float8_e4m3fn" || torch_dtype == "int8";
  const double gemm = matmul_flops(eight_bit ? "bfloat16" : torch_dtype);
  return gemm / compute_efficiency * attention_efficiency;
}

double HardwareSpec::all_reduce_s(int tp, double bytes) const {
  if (tp <= 1) return 0;
  const double share = 2.0 * (tp - 1) / tp * bytes;  // ring: each GPU sends and receives this much
  const int i = tp == 2 ? 0 : tp == 4 ? 1 : tp == 8 ? 2 : -1;
  if (i >= 0 && all_reduce_bus_gbps[i] > 0) return all_reduce_latency_s[i] + share / (all_reduce_bus_gbps[i] * 1e9);
  return share / achieved_link_bandwidth() + link_latency_s;
}

double HardwareSpec::combine(double c, double m) const {
  if (overlap_exponent == 0) return c > m ? c : m;
  if (c <= 0 || m <= 0) return c + m;
  const double hi = c > m ? c : m, lo = c > m ? m : c;
  return hi * std::pow(1.0 + std::pow(lo / hi, overlap_exponent), 1.0 / overlap_exponent);
}

double HardwareSpec::memory_bytes() const { return memory_gib * 1024.0 * 1024.0 * 1024.0; }
double HardwareSpec::achieved_bandwidth() const { return bandwidth_gbps * 1e9 * memory_efficiency; }
double HardwareSpec::achieved_kv_bandwidth() const {
  return bandwidth_gbps * 1e9 * (kv_read_efficiency > 0 ? kv_read_efficiency : memory_efficiency);
}
double HardwareSpec::achieved_link_bandwidth() const { return link_gbps * 1e9 * link_efficiency; }

}  // namespace testbed
