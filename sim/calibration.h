// Fitting a hardware spec's device terms to measured per-operator times
// (testbed calibrate --profiles / --network): the model each fit assumes is
// the roofline cost model's own (sim/roofline_cost_model.h), so the fitted
// keys mean in simulation what they meant in the measurement.
//
//   weight GEMMs    t = kernel_s + combine(FLOPs / (peak * compute.efficiency),
//                                          bytes / (bandwidth * memory.efficiency))
//                   combine = (c^p + m^p)^(1/p), p = compute.overlap_exponent;
//                   fitted by Levenberg-Marquardt on relative errors
//   elementwise     t = kernel_s + bytes * b per op (norms, RoPE, SwiGLU, adds)
//   all-reduce      t = latency + 2 (TP - 1) / TP * bytes / bus bandwidth, per TP degree
//   whole steps     the roofline's prediction of each profiled step (testbed profile tables)
//
// Readers for Vidur's profile layout (microsoft/vidur, data/profiling: the
// compute/<gpu>/<model>/mlp.csv per-layer op times by num_tokens and tensor
// parallelism, and network/<gpu>/all_reduce.csv; see ../shared/profiles).
// Errors name the file, the line and the column.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "sim/hardware_spec.h"
#include "sim/profile_table.h"

namespace testbed {

struct OpSample {
  double flops = 0, bytes = 0, seconds = 0;
};

struct FitQuality {
  int samples = 0;
  double median_abs_rel = 0, p90_abs_rel = 0;  // |model - measured| / measured
};

struct GemmFit {
  double kernel_s = 0, compute_efficiency = 1, memory_efficiency = 1, overlap_exponent = 1;
  FitQuality quality;
};
// peak_flops and peak_bandwidth: the spec's peaks (FLOP/s, bytes/s), the efficiencies are shares of them.
GemmFit fit_gemms(const std::vector<OpSample>& samples, double peak_flops, double peak_bandwidth);

// Whole-step times of one model (a `testbed profile` table, sim/profile_table.h)
// against the roofline with `base`'s peaks and fixed costs: compute, memory,
// K/V read and attention efficiency and step.overhead_s (per-layer fixed
// costs are folded into it: one model cannot tell them apart).
struct StepFit {
  double compute_efficiency = 1, memory_efficiency = 1, kv_read_efficiency = 1, attention_efficiency = 1;
  double step_overhead_s = 0;
  FitQuality quality;
};
StepFit fit_step_profile(const ProfileTable& table, const ModelConfig& model, int tensor_parallel,
                         const HardwareSpec& base);

// y = intercept + slope * x minimising the relative error (weights 1 / y).
struct LineFit {
  double intercept = 0, slope = 0;
  FitQuality quality;
};
LineFit fit_line_relative(const std::vector<std::pair<double, double>>& xy);

// One Vidur mlp.csv: per row the model's shape, the tokens, the TP degree and
// the median time of each op (seconds).
struct VidurOpProfile {
  struct Row {
    int heads = 0, kv_heads = 0, hidden = 0, inter = 0, tokens = 0, tp = 1;
    bool gated = true;
    std::map<std::string, double> seconds;  // op -> median seconds
  };
  std::vector<Row> rows;
};
VidurOpProfile read_vidur_mlp_csv(const std::string& path);

// The four weight GEMMs of each row (QKV, O, gate+up, down per GPU, 16-bit), as the roofline counts them.
std::vector<OpSample> vidur_gemm_samples(const VidurOpProfile& p);
// The elementwise ops of each row (input and post-attention RMSNorm, RoPE, SwiGLU, residual add): op -> samples.
std::map<std::string, std::vector<OpSample>> vidur_elementwise_samples(const VidurOpProfile& p);

// One Vidur all_reduce.csv: (bytes, seconds) per TP degree, within one node only.
std::map<int, std::vector<std::pair<double, double>>> read_vidur_all_reduce_csv(const std::string& path);

// This project's attention kernel benchmarks (bench_attention --profile_dir=DIR):
// DIR/decode_profile.csv (paged_decode rows: the bytes each call moves and its
// time) and DIR/prefill_profile.csv (paged_prefill rows: causal FLOPs and time).
struct AttentionSamples {
  std::vector<OpSample> decode;   // bytes, seconds
  std::vector<OpSample> prefill;  // flops, seconds
};
AttentionSamples read_attention_profiles(const std::string& dir);

// The share s of `peak` that best explains samples timed work / (peak * s) (relative least squares).
FitQuality fit_share(const std::vector<std::pair<double, double>>& work_seconds, double peak, double& share);

}  // namespace testbed
