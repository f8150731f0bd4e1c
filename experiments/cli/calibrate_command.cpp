// testbed calibrate SIM_CONFIG.ini [--profiles A.csv,B.csv] [--network ALL_REDUCE.csv] [--kernels DIR]
//                   [--steps PROFILE.h5] [--measured TABLE.csv] --output CALIBRATED.ini [--section.key=value ...]
//
// Fits the config's hardware spec, in this order:
//
// From per-operator profiles (--profiles: Vidur mlp.csv files of one GPU,
// sim/calibration.h): the weight GEMMs' compute.efficiency,
// memory.efficiency, compute.overlap_exponent and per-kernel fixed cost, and
// each elementwise op's fixed cost; step.layer_overhead_s is the fixed cost
// of one layer's four GEMMs and five elementwise kernels.
//
// From all-reduce times (--network: a Vidur all_reduce.csv): per TP degree
// 2, 4, 8 within one node, all_reduce.tpN_latency_s and _bus_gbps.
//
// From this project's attention kernel benchmarks (--kernels DIR: the
// --profile_dir of bench_attention): memory.kv_read_efficiency from the
// paged decode kernel's bytes and times, compute.attention_efficiency from
// the paged prefill kernel's FLOPs and times.
//
// From this project's own step profiles (--steps FILE.h5: a `testbed profile`
// table of the config's model, e.g. on the CUDA executor): the roofline is
// fitted to the whole steps: compute, memory, K/V read and attention
// efficiency and step.overhead_s (replacing what the sources above fitted).
//
// From measured serving points (--measured, experiments/cli/measured_table.h),
// by simulating every point with the config (roofline cost model) and the
// spec fitted so far:
//   1. step.overhead_s, the host cost of an engine step: the value that makes
//      the mean signed relative error of TPOT over the points zero (bisection:
//      TPOT grows with it);
//   2. the front end (engine/frontend.h): with that overhead and no front end,
//      each point's missing TTFT is fitted by least squares as c + lag * D,
//      D its simulated step duration (TPOT): lag is serving.output_lag_steps,
//      c is serving.request_s (the points identify only the sum of the fixed
//      costs before and after the engine, so serving.output_s stays 0).
// Then simulates the points again with the calibrated spec, prints each
// point's signed errors and the median |error| per metric, and writes the
// spec (every key, with a header saying how it was made) to CALIBRATED.ini.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "engine/common/config_error.h"
#include "engine/common/pending_files.h"
#include "experiments/cli/command.h"
#include "experiments/cli/experiment.h"
#include "experiments/cli/huge_pages.h"
#include "experiments/cli/measured_table.h"
#include "experiments/cli/provenance.h"
#include "sim/calibration.h"
#include "sim/hardware_spec.h"

namespace fs = std::filesystem;

namespace testbed {
namespace {

std::string fmt4(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

struct PointRun {
  double ttft = 0, tpot = 0;
  Summary summary;
};

class Calibrator {
 public:
  Calibrator(std::string config, std::vector<std::string> args, std::vector<MeasuredPoint> points, HardwareSpec hw,
             std::string scratch)
      : config_(std::move(config)), args_(std::move(args)), points_(std::move(points)), hw_(std::move(hw)),
        scratch_(std::move(scratch)) {}

  // Every point simulated with `hw` (written to a scratch spec file).
  std::vector<PointRun> simulate(const HardwareSpec& hw) {
    std::ofstream(scratch_) << hw.to_ini();
    std::vector<std::string> args = args_;
    args.push_back("--cost_model.hardware=" + scratch_);
    // The front end comes from the spec (its serving.* keys), never from the config.
    const std::pair<const char*, double> frontend[] = {{"--frontend.request_s=", hw.serving_request_s},
                                                       {"--frontend.output_lag_steps=", hw.serving_output_lag_steps},
                                                       {"--frontend.output_s=", hw.serving_output_s}};
    for (const auto& [key, v] : frontend) {
      char b[48];
      std::snprintf(b, sizeof b, "%.17g", v);
      args.push_back(key + std::string(b));
    }
    std::vector<PointRun> out;
    for (const MeasuredPoint& p : points_) {
      PointRun r;
      r.summary = simulate_measured_point(config_, args, p, "");
      r.ttft = r.summary.get("ttft_mean_s");
      r.tpot = r.summary.get("tpot_mean_s");
      out.push_back(std::move(r));
    }
    return out;
  }

  HardwareSpec fit() {
    HardwareSpec hw = hw_;
    hw.serving_request_s = hw.serving_output_lag_steps = hw.serving_output_s = 0;
    // 1. step.overhead_s: mean relative TPOT error -> 0.
    auto tpot_err = [&](double overhead) {
      HardwareSpec h = hw;
      h.step_overhead_s = overhead;
      const std::vector<PointRun> runs = simulate(h);
      double sum = 0;
      int n = 0;
      for (size_t i = 0; i < points_.size(); ++i)
        if (!std::isnan(points_[i].values[2])) sum += (runs[i].tpot - points_[i].values[2]) / points_[i].values[2], ++n;
      require(n > 0, "--measured", "the table measures no tpot_mean_ms: step.overhead_s cannot be fitted");
      return sum / n;
    };
    double lo = 0, hi = 0.05;
    if (tpot_err(lo) >= 0) {
      hi = lo;  // even without host overhead the simulated steps are too slow: keep 0, say so
      std::printf("calibrate: TPOT is %+.1f%% with step.overhead_s = 0; the device terms are too slow\n",
                  100 * tpot_err(0));
    } else {
      require(tpot_err(hi) > 0, "step.overhead_s", "no value up to 50 ms gives the measured TPOT");
      for (int it = 0; it < 30 && hi - lo > 1e-6; ++it) {
        const double mid = 0.5 * (lo + hi);
        (tpot_err(mid) < 0 ? lo : hi) = mid;
      }
    }
    hw.step_overhead_s = 0.5 * (lo + hi);
    fits_.push_back("step.overhead_s = " + fmt4(hw.step_overhead_s) + " (mean TPOT error " +
                    fmt4(100 * tpot_err(hw.step_overhead_s)) + "%)");
    // 2. The front end: missing TTFT = c + lag * D, least squares.
    const std::vector<PointRun> runs = simulate(hw);
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < points_.size(); ++i) {
      const double real = points_[i].values[0];
      if (std::isnan(real)) continue;
      const double x = runs[i].tpot, y = real - runs[i].ttft;
      n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    require(n > 0, "--measured", "the table measures no ttft_mean_ms: the front end cannot be fitted");
    double lag = n >= 2 && n * sxx - sx * sx > 0 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0.0;
    lag = std::clamp(lag, 0.0, 16.0);
    double c = (sy - lag * sx) / n;
    if (c < 0) {  // a negative fixed cost is not a front end: refit the lag alone
      c = 0;
      lag = sxx > 0 ? std::clamp(sxy / sxx, 0.0, 16.0) : 0.0;
    }
    hw.serving_request_s = c;
    hw.serving_output_lag_steps = lag;
    fits_.push_back("serving.request_s = " + fmt4(c) + ", serving.output_lag_steps = " + fmt4(lag) +
                    " (TTFT missing = c + lag x step, least squares over " + fmt4(n) + " points)");
    return hw;
  }

  const std::vector<std::string>& fits() const { return fits_; }

 private:
  std::string config_;
  std::vector<std::string> args_;
  std::vector<MeasuredPoint> points_;
  HardwareSpec hw_;
  std::string scratch_;
  std::vector<std::string> fits_;
};

std::string quality_text(const FitQuality& q) {
  return "median |error| " + fmt4(100 * q.median_abs_rel) + "%, p90 " + fmt4(100 * q.p90_abs_rel) + "%, " +
         std::to_string(q.samples) + " samples";
}

// The device terms from per-operator profiles; returns what was fitted, as lines.
std::vector<std::string> fit_profiles(const std::vector<std::string>& paths, HardwareSpec& hw) {
  std::vector<OpSample> gemms;
  std::map<std::string, std::vector<OpSample>> elementwise;
  for (const std::string& p : paths) {
    const VidurOpProfile prof = read_vidur_mlp_csv(p);
    const std::vector<OpSample> g = vidur_gemm_samples(prof);
    gemms.insert(gemms.end(), g.begin(), g.end());
    for (auto& [op, v] : vidur_elementwise_samples(prof)) elementwise[op].insert(elementwise[op].end(), v.begin(), v.end());
  }
  // The profiles are 16-bit: the bf16 peak (fp16's is the same on these GPUs).
  const GemmFit f = fit_gemms(gemms, hw.bf16_tflops * 1e12, hw.bandwidth_gbps * 1e9);
  // Weight streaming says nothing about attention's paged K/V reads: they keep
  // the spec's memory efficiency until attention is measured (--kernels).
  std::vector<std::string> lines;
  if (hw.kv_read_efficiency == 0) {
    hw.kv_read_efficiency = hw.memory_efficiency;
    lines.push_back("memory.kv_read_efficiency = " + fmt4(hw.kv_read_efficiency) +
                    " (kept: the spec's memory.efficiency before the GEMM fit; no attention profile)");
  }
  hw.compute_efficiency = f.compute_efficiency;
  hw.memory_efficiency = f.memory_efficiency;
  hw.overlap_exponent = f.overlap_exponent;
  lines.insert(lines.begin(), "compute.efficiency = " + fmt4(f.compute_efficiency) + ", memory.efficiency = " +
                  fmt4(f.memory_efficiency) + ", compute.overlap_exponent = " + fmt4(f.overlap_exponent) +
                  ", GEMM kernel " + fmt4(1e6 * f.kernel_s) + " us (weight GEMMs: " + quality_text(f.quality) + ")");
  double layer = 4 * f.kernel_s;
  for (const auto& [op, samples] : elementwise) {
    std::vector<std::pair<double, double>> xy;
    for (const OpSample& s : samples) xy.push_back({s.bytes, s.seconds});
    const LineFit l = fit_line_relative(xy);
    const double fixed = std::max(0.0, l.intercept);
    layer += fixed;
    lines.push_back("  " + op + ": " + fmt4(1e6 * fixed) + " us + bytes at " +
                    fmt4(l.slope > 0 ? 1e-9 / l.slope : 0) + " GB/s (" + quality_text(l.quality) + ")");
  }
  hw.layer_overhead_s = layer;
  lines.push_back("step.layer_overhead_s = " + fmt4(layer) + " (4 GEMM kernels and 5 elementwise kernels per layer)");
  return lines;
}

std::vector<std::string> fit_kernels(const std::string& dir, HardwareSpec& hw) {
  const AttentionSamples a = read_attention_profiles(dir);
  std::vector<std::string> lines;
  // One kernel's share of a peak: `work` picks bytes or FLOPs from a sample.
  auto fit = [&](const std::vector<OpSample>& samples, double OpSample::*work, double peak, const char* peak_key,
                 const char* kernel, const char* key, double& out) {
    if (samples.empty()) return;
    std::vector<std::pair<double, double>> ws;
    for (const OpSample& s : samples) ws.push_back({s.*work, s.seconds});
    double share = 0;
    const FitQuality q = fit_share(ws, peak, share);
    require(share > 0 && share <= 1, "--kernels",
            dir + ": paged " + kernel + " ran at " + fmt4(share) + " of " + peak_key);
    out = share;
    lines.push_back(std::string(key) + " = " + fmt4(share) + " (paged " + kernel + " attention: " + quality_text(q) + ")");
  };
  fit(a.decode, &OpSample::bytes, hw.bandwidth_gbps * 1e9, "memory.bandwidth_gbps", "decode",
      "memory.kv_read_efficiency", hw.kv_read_efficiency);
  fit(a.prefill, &OpSample::flops, hw.bf16_tflops * 1e12, "compute.bf16_tflops", "prefill",
      "compute.attention_efficiency", hw.attention_efficiency);
  return lines;
}

std::vector<std::string> fit_steps(const std::string& path, const RunConfig& config, HardwareSpec& hw) {
  const ProfileTable table = ProfileTable::load(path);
  const ModelConfig model = ModelConfig::from_json_file(config.model.config);
  require(table.model.empty() || table.model == model.name, "--steps",
          path + " profiles " + table.model + ", but the config's model is " + model.name);
  const StepFit f = fit_step_profile(table, model, config.cost_model.tensor_parallel, hw);
  hw.compute_efficiency = f.compute_efficiency;
  hw.memory_efficiency = f.memory_efficiency;
  hw.kv_read_efficiency = f.kv_read_efficiency;
  hw.attention_efficiency = f.attention_efficiency;
  hw.step_overhead_s = f.step_overhead_s;
  return {"compute.efficiency = " + fmt4(f.compute_efficiency) + ", memory.efficiency = " + fmt4(f.memory_efficiency) +
          ", memory.kv_read_efficiency = " + fmt4(f.kv_read_efficiency) + ", compute.attention_efficiency = " +
          fmt4(f.attention_efficiency) + ", step.overhead_s = " + fmt4(f.step_overhead_s) + " (whole steps of " +
          path + " on " + (table.executor.empty() ? "?" : table.executor) + ": " + quality_text(f.quality) + ")"};
}

std::vector<std::string> fit_network(const std::string& path, HardwareSpec& hw) {
  std::vector<std::string> lines;
  for (const auto& [tp, samples] : read_vidur_all_reduce_csv(path)) {
    const int i = tp == 2 ? 0 : tp == 4 ? 1 : tp == 8 ? 2 : -1;
    if (i < 0) continue;
    std::vector<std::pair<double, double>> xy;
    for (const auto& [bytes, s] : samples) xy.push_back({2.0 * (tp - 1) / tp * bytes, s});
    const LineFit l = fit_line_relative(xy);
    require(l.slope > 0 && l.intercept >= 0, "--network",
            path + ": the TP " + std::to_string(tp) + " all-reduce times do not fit latency + bytes / bandwidth");
    hw.all_reduce_latency_s[i] = l.intercept;
    hw.all_reduce_bus_gbps[i] = 1e-9 / l.slope;
    lines.push_back("all_reduce.tp" + std::to_string(tp) + ": " + fmt4(1e6 * l.intercept) + " us + bytes at " +
                    fmt4(1e-9 / l.slope) + " GB/s bus (" + quality_text(l.quality) + ")");
  }
  require(!lines.empty(), "--network", path + ": no all-reduce at TP 2, 4 or 8 within one node");
  return lines;
}

int calibrate_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: testbed calibrate SIM_CONFIG.ini [--profiles A.csv,B.csv] [--network ALL_REDUCE.csv]\n"
                 "                 [--kernels BENCH_DIR] [--steps PROFILE.h5] [--measured TABLE.csv] --output CALIBRATED.ini\n"
                 "                 [--section.key=value ...]\n\n"
                 "Fits the config's hardware spec: GEMM efficiencies, their overlap and per-layer fixed costs\n"
                 "from per-operator profiles (Vidur mlp.csv), all-reduce latency and bandwidth per TP degree\n"
                 "(Vidur all_reduce.csv), attention efficiencies from bench_attention's profiles, the\n"
                 "roofline's efficiencies and step overhead from a testbed profile of whole steps, then\n"
                 "step.overhead_s from measured TPOT and the front end\n"
                 "(serving.request_s, serving.output_lag_steps) from measured TTFT; prints the residuals and\n"
                 "writes the calibrated spec.\n";
    return args.empty() ? 2 : 0;
  }
  std::string output, measured, profiles, network, kernels, steps;
  RunConfig config;
  OptionTable table;
  table.add_flag("output", &output, "the calibrated hardware spec to write (.ini)");
  table.add_flag("measured", &measured, "measured serving points (CSV)");
  table.add_flag("profiles", &profiles, "per-operator profiles of one GPU (Vidur mlp.csv), comma-separated");
  table.add_flag("network", &network, "all-reduce times (Vidur all_reduce.csv)");
  table.add_flag("kernels", &kernels, "attention kernel benchmarks (bench_attention --profile_dir)");
  table.add_flag("steps", &steps, "whole-step profile of the config's model (testbed profile's .h5)");
  load_run_config(args[0], {args.begin() + 1, args.end()}, config, table);
  apply_huge_pages(config.driver.huge_pages, /*simulates=*/true);
  print_warnings(config);
  {  // The front end is what --measured fits (the spec's serving.*): a frontend.* of the run would be overridden.
    std::ifstream in(args[0]);
    const std::string ini((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const std::string& key : OptionTable::mentioned_keys({args.begin() + 1, args.end()}, &ini))
      require(key.rfind("frontend.", 0) != 0, key,
              "calibrate takes the front end from the hardware spec's [serving] keys (and --measured fits them): "
              "remove " + key + " from " + args[0] + " and the command line");
  }
  require(!measured.empty() || !profiles.empty() || !network.empty() || !kernels.empty() || !steps.empty(),
          "--measured", "calibrate needs something to fit to: --profiles, --network, --kernels, --steps and/or --measured");
  require(!output.empty(), "--output", "calibrate needs the file to write the calibrated spec to");
  require(config.cost_model.kind.name == "roofline" && !config.cost_model.hardware.empty(), "cost_model.kind",
          "calibrate fits a hardware spec: the config needs cost_model.kind = roofline with cost_model.hardware");
  require(!fs::is_directory(output), "--output", "'" + output + "' is a directory; give the .ini file to write");
  const std::vector<MeasuredPoint> points = measured.empty() ? std::vector<MeasuredPoint>{} : read_measured_table(measured);
  HardwareSpec base = HardwareSpec::from_ini_file(config.cost_model.hardware);
  // Device terms first: the serving fit then sees the calibrated device.
  std::vector<std::string> device_fits;
  if (!profiles.empty()) {
    const std::vector<std::string> paths = split_commas(profiles);
    require(!paths.empty(), "--profiles", "no file named");
    device_fits = fit_profiles(paths, base);
  }
  if (!network.empty()) {
    const std::vector<std::string> lines = fit_network(network, base);
    device_fits.insert(device_fits.end(), lines.begin(), lines.end());
  }
  if (!kernels.empty()) {
    const std::vector<std::string> lines = fit_kernels(kernels, base);
    device_fits.insert(device_fits.end(), lines.begin(), lines.end());
  }
  if (!steps.empty()) {
    const std::vector<std::string> lines = fit_steps(steps, config, base);
    device_fits.insert(device_fits.end(), lines.begin(), lines.end());
  }
  // Check the output is writable before the work.
  const std::string tmp = output + ".tmp";
  { std::ofstream probe(tmp); require(static_cast<bool>(probe), "--output", "cannot write '" + tmp + "'"); }
  const std::string scratch = output + ".scratch.ini";
  PendingFile pending_tmp(tmp), pending_scratch(scratch);  // removed on any failure or signal
  std::vector<std::string> rest;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool flag = false;
    for (const char* f : {"--output", "--measured", "--profiles", "--network", "--kernels", "--steps"}) {
      if (a == f) flag = true, ++i;
      if (a.rfind(std::string(f) + "=", 0) == 0) flag = true;
    }
    if (!flag) rest.push_back(a);
  }
  std::printf("calibrate %s from %s\n", args[0].c_str(), config.cost_model.hardware.c_str());
  for (const std::string& f : device_fits) std::printf("  fitted %s\n", f.c_str());
  Calibrator cal(args[0], rest, points, base, scratch);
  HardwareSpec fitted = base;
  std::vector<PointRun> runs;
  if (!points.empty()) {
    std::printf("against %s (%zu points)\n", measured.c_str(), points.size());
    fitted = cal.fit();
    runs = cal.simulate(fitted);
  }
  for (const std::string& f : cal.fits()) std::printf("  fitted %s\n", f.c_str());
  std::vector<std::vector<double>> abs_err(kMeasuredMetrics.size());
  std::string residuals;
  if (!points.empty()) {
    std::printf("\n%-14s", "point");
    for (const MeasuredMetric& m : kMeasuredMetrics) std::printf(" %13s", m.column);
    std::printf("\n");
  }
  for (size_t i = 0; i < points.size(); ++i) {
    std::printf("%-14s", points[i].name.c_str());
    residuals += "#   " + points[i].name + ":";
    for (size_t m = 0; m < kMeasuredMetrics.size(); ++m) {
      const double real = points[i].values[m];
      if (std::isnan(real)) {
        std::printf(" %13s", "-");
        continue;
      }
      const double e = (runs[i].summary.get(kMeasuredMetrics[m].summary) - real) / real;
      abs_err[m].push_back(std::abs(e));
      std::printf(" %+12.1f%%", 100 * e);
      char b[64];
      std::snprintf(b, sizeof b, " %s %+.1f%%", kMeasuredMetrics[m].column, 100 * e);
      residuals += b;
    }
    residuals += "\n";
    std::printf("\n");
  }
  if (!points.empty()) {
    std::printf("%-14s", "median |err|");
    for (const auto& v : abs_err)
      if (v.empty())
        std::printf(" %13s", "-");
      else
        std::printf(" %12.1f%%", 100 * percentile(v, 50));
    std::printf("\n");
  }
  {
    std::ofstream out(tmp);
    out << "# " << (fitted.name.empty() ? "hardware" : fitted.name) << ", calibrated by\n#   testbed calibrate " << args[0];
    if (!profiles.empty()) out << " --profiles " << profiles;
    if (!network.empty()) out << " --network " << network;
    if (!kernels.empty()) out << " --kernels " << kernels;
    if (!steps.empty()) out << " --steps " << steps;
    if (!measured.empty()) out << " --measured " << measured;
    out << " --output " << output << "\n# by testbed " << build_commit() << ", from " << config.cost_model.hardware
        << " (every other key as there). Fitted:\n";
    for (const std::string& f : device_fits) out << "#   " << f << "\n";
    for (const std::string& f : cal.fits()) out << "#   " << f << "\n";
    if (!points.empty())
      out << "# Residuals (simulated - measured) / measured with this spec:\n" << residuals;
    else
      out << "#   (no serving points: step.overhead_s and [serving] as in the spec it started from)\n";
    out << "\n";
    out << fitted.to_ini();
    require(static_cast<bool>(out), "--output", "cannot write '" + tmp + "'");
  }
  fs::rename(tmp, output);
  pending_tmp.done();
  std::printf("\ncalibrated spec  %s\n", output.c_str());
  return 0;
}

}  // namespace

TESTBED_COMMAND("calibrate",
                "calibrate SIM_CONFIG.ini [--profiles A.csv,B.csv] [--network AR.csv] [--kernels DIR] [--steps P.h5] "
                "[--measured TABLE.csv] --output CALIBRATED.ini",
                "fit a hardware spec to per-operator profiles, all-reduce times, kernel benchmarks, step profiles and "
                "measured serving points",
                calibrate_command);

}  // namespace testbed
