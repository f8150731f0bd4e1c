// HardwareSpec: one accelerator as the roofline cost model sees it — dense peak
// FLOP/s per dtype, HBM capacity and bandwidth, the share of each a real kernel
// achieves, the tensor-parallel interconnect, the engine's per-step overhead, and
// a rental price and power figure for equal-cost / equal-power comparisons
// (Splitwise-style disaggregation studies).
// Read from an INI file (experiments/hardware/*.ini) through an OptionTable:
//
//   [device]        name
//   [compute]       bf16_tflops fp16_tflops fp8_tflops int8_tops tf32_tflops fp32_tflops
//                   efficiency attention_efficiency
//                   gemm_tile_n        columns of one GEMM tile: a MoE expert's GEMM width is
//                                      rounded up to whole tiles (default 128; 0 = no rounding)
//                   overlap_exponent   how a weight GEMM's compute and memory times combine:
//                                      0 (default) max(c, m), the classic roofline; p >= 1
//                                      (c^p + m^p)^(1/p), 1 = no overlap (fitted by testbed calibrate)
//   [memory]        capacity_gib bandwidth_gbps efficiency reserve_gib
//                   kv_read_efficiency   share of the peak attention kernels reach reading
//                                        paged K/V (0, the default: memory.efficiency)
//   [interconnect]  bandwidth_gbps efficiency latency_s
//   [all_reduce]    tp2_latency_s tp2_bus_gbps, tp4_..., tp8_...  (optional, 0 = unset)
//                   measured all-reduce within one node at that TP degree:
//                   latency + 2 (TP - 1) / TP * bytes / bus bandwidth; unset
//                   degrees use interconnect.*
//   [step]          overhead_s
//                   layer_overhead_s   fixed seconds per decoder layer per step (the kernels'
//                                      launch and ramp, measured per op; 0 = none)
//   [cost]          price_per_gpu_hour_usd   (optional, 0 = unknown)
//   [power]         tdp_w                    (optional, 0 = unknown)
//   [serving]       request_s output_lag_steps output_s   (optional, 0: the engine alone)
//                   the serving stack's front end as measured with this GPU:
//                   the defaults of frontend.* (engine/frontend.h) in runs
//                   that use this spec and leave those keys unset
//
// Unknown keys, bad values and missing required keys are ConfigErrors that name
// the file and the key.
#pragma once

#include <string>

namespace testbed {

struct HardwareSpec {
  std::string name;    // device.name, for reports
  std::string origin;  // the file it was read from ("" when built in code)

  // Dense (no 2:4 sparsity) tensor-core peaks, 1e12 FLOP/s (int8: 1e12 OP/s). 0: not supported.
  double bf16_tflops = 0;  // required
  double fp16_tflops = 0;
  double fp8_tflops = 0;
  double int8_tops = 0;
  double tf32_tflops = 0;
  double fp32_tflops = 0;  // CUDA cores, not tensor cores (PyTorch's default for float32 matmul)
  double compute_efficiency = 1.0;    // achieved / peak for GEMMs
  double attention_efficiency = 1.0;  // achieved / peak for attention kernels (FlashAttention-style)

  double memory_gib = 0;          // memory.capacity_gib, as the driver reports it (2^30 bytes); required
  double bandwidth_gbps = 0;      // memory.bandwidth_gbps, HBM peak, 1e9 bytes/s; required
  double memory_efficiency = 1.0; // achieved / peak for streaming reads
  double reserve_gib = 0;         // memory.reserve_gib: per-GPU activations, workspaces, CUDA graphs
  double kv_read_efficiency = 0;  // memory.kv_read_efficiency: attention's K/V reads (0: memory_efficiency)

  double link_gbps = 0;           // interconnect.bandwidth_gbps: per GPU, one direction, 1e9 bytes/s
  double link_efficiency = 1.0;   // achieved all-reduce bus bandwidth / link_gbps
  double link_latency_s = 0;      // fixed cost of one small all-reduce

  double step_overhead_s = 0;     // step.overhead_s: host scheduling + launch per engine step
  double layer_overhead_s = 0;    // step.layer_overhead_s: fixed device cost per decoder layer per step
  double overlap_exponent = 0;    // compute.overlap_exponent: 0 = max(compute, memory)
  double gemm_tile_n = 128;       // compute.gemm_tile_n: expert GEMM widths round up to it (0: none)
  // all_reduce.tp{2,4,8}_*: index 0 = TP 2, 1 = TP 4, 2 = TP 8; 0 = unset.
  double all_reduce_latency_s[3] = {0, 0, 0};
  double all_reduce_bus_gbps[3] = {0, 0, 0};
  // Seconds of one all-reduce of `bytes` over `tp` GPUs (the measured table when set).
  double all_reduce_s(int tp, double bytes) const;
  // A weight GEMM's time from its compute and memory times (compute.overlap_exponent).
  double combine(double compute_s, double memory_s) const;

  // For cost and power studies only; the cost model does not read them.
  double price_per_gpu_hour = 0;  // cost.price_per_gpu_hour_usd: USD per GPU-hour; 0 = unknown
  double tdp_w = 0;               // power.tdp_w: board TDP, watts (an upper bound, not measured draw); 0 = unknown

  // serving.*: the front end's defaults for runs on this spec (engine/frontend.h).
  double serving_request_s = 0, serving_output_lag_steps = 0, serving_output_s = 0;

  static HardwareSpec from_ini_file(const std::string& path);
  static HardwareSpec from_ini_text(const std::string& text, const std::string& origin);
  // Every key with its value, as an INI file (what `testbed calibrate` writes).
  std::string to_ini() const;
  // Throws ConfigError("<section.key>: ...") for the first bad field.
  void validate() const;

  // Achievable FLOP/s of a GEMM with operands of `torch_dtype` (a Hugging Face
  // torch_dtype). 8-bit weights fall back to the bf16 peak where the device has
  // no 8-bit tensor cores (weight-only kernels upcast, as Marlin does on Ampere).
  // Throws ConfigError naming the compute key when the device lacks the dtype.
  double matmul_flops(const std::string& torch_dtype) const;
  double attention_flops(const std::string& torch_dtype) const;
  double memory_bytes() const;        // capacity in bytes
  double achieved_bandwidth() const;  // bytes/s a streaming kernel reaches
  double achieved_kv_bandwidth() const;  // bytes/s attention reaches reading paged K/V
  double achieved_link_bandwidth() const;
};

}  // namespace testbed
