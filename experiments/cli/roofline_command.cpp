// testbed roofline --model M.json --hardware H.ini [--context 1024] [--tp 1] [--ep 1] [--precision auto|fp8|w4a16] [--output FILE.csv]
// The roofline cost model's view of one model on one device: the decode batch
// size at which decode turns compute-bound, KV capacity from memory, and decode
// step time against batch size (a table of powers of two and the knee; with
// --output, every batch size 1..--max-batch as CSV for analysis/plot_roofline.py).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "experiments/cli/command.h"
#include "sim/memory_planner.h"
#include "sim/roofline_cost_model.h"

namespace testbed {
namespace {

constexpr const char* kUsage =
    "roofline --model M.json --hardware H.ini [--context 1024] [--tp 1] [--ep 1] [--precision auto|fp8|w4a16] [--output FILE.csv]";

struct RooflineArgs {
  std::string model, hardware, output;
  int context = 1024, tp = 1, ep = 1, max_batch = 1024, block_size = 16;
  std::string precision = "auto";
  double fraction = 0.9;
};

void bind_flags(OptionTable& t, RooflineArgs& a) {
  t.add_flag("model", &a.model, "Hugging Face config.json (experiments/models/)");
  t.add_flag("hardware", &a.hardware, "hardware spec .ini (experiments/hardware/)");
  t.add_flag("context", &a.context, "cached tokens per decoding sequence");
  t.add_flag("tp", &a.tp, "tensor-parallel GPUs per instance");
  t.add_flag("ep", &a.ep, "expert groups over those GPUs (mixture-of-experts models)");
  t.add_flag("precision", &a.precision, "linear layers: auto (the checkpoint's), fp8 or w4a16 (group 128)");
  t.add_flag("output", &a.output, "CSV of the decode curve, batch 1..max-batch");
  t.add_flag("max-batch", &a.max_batch, "largest decode batch");
  t.add_flag("block-size", &a.block_size, "KV block size, tokens");
  t.add_flag("fraction", &a.fraction, "gpu_memory_fraction for KV capacity");
}

std::string format_batch(double b) {
  if (std::isinf(b)) return "never";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", b);
  return buf;
}

void write_curve(const RooflineCostModel& m, const RooflineArgs& a, const DecodeCrossover& x) {
  std::ofstream out(a.output);
  if (!out) throw ConfigError("--output: cannot write '" + a.output + "'");
  out << "# testbed roofline: model " << m.model().name << ", hardware " << m.hardware().name << ", tp " << a.tp
      << ", context " << a.context << ", dense_crossover " << format_batch(x.dense_batch) << ", step_crossover "
      << format_batch(x.step_batch) << "\n";
  out << "batch,context,step_s,roofline_s,compute_s,memory_s,comm_s,overhead_s,dense_compute_s,dense_memory_s,"
         "tokens_per_s\n";
  char line[512];
  for (int b = 1; b <= a.max_batch; ++b) {
    const StepCost c = m.breakdown(decode_shape(b, a.context));
    std::snprintf(line, sizeof line, "%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", b, a.context, c.total_s,
                  c.roofline_s, c.compute_s, c.memory_s, c.comm_s, c.overhead_s, c.dense_compute_s(),
                  c.dense_memory_s(), b / c.total_s);
    out << line;
  }
  if (!out) throw ConfigError("--output: cannot write '" + a.output + "'");
}

int roofline_command(const std::vector<std::string>& args) {
  RooflineArgs a;
  OptionTable flags;
  bind_flags(flags, a);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << "usage: testbed " << kUsage << "\n\noptions:\n" << flags.help() << "\n";
    return 0;
  }
  try {
    flags.parse(args);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("roofline: ") + e.what() + " (usage: testbed " + kUsage + ")");
  }
  require(!a.model.empty(), "--model", "required (a config.json, e.g. experiments/models/llama-3.1-8b.json)");
  require(!a.hardware.empty(), "--hardware", "required (a spec .ini, e.g. experiments/hardware/h100-sxm.ini)");
  require(a.context >= 0, "--context", "must be >= 0");
  require(a.max_batch >= 1, "--max-batch", "must be >= 1");
  require(a.block_size >= 1, "--block-size", "must be >= 1");

  if (!a.output.empty()) {
    // Fail on an unwritable path before any work is printed.
    std::ofstream probe(a.output);
    if (!probe) throw ConfigError("--output: cannot write '" + a.output + "'");
  }

  ModelConfig model = ModelConfig::from_json_file(a.model);
  if (a.precision != "auto" && a.precision != "fp8" && a.precision != "w4a16")
    throw ConfigError("--precision: '" + a.precision + "' is not auto, fp8 or w4a16");
  if (a.precision != "auto") model.precision = a.precision;
  HardwareSpec hardware = HardwareSpec::from_ini_file(a.hardware);
  std::unique_ptr<RooflineCostModel> built;
  try {
    built = std::make_unique<RooflineCostModel>(hardware, model, a.tp, a.ep);
  } catch (const ConfigError& e) {
    // Here the degrees are the --tp and --ep flags, not the config keys.
    const std::string what = e.what();
    for (const auto& [key, flag] : {std::pair<std::string, std::string>{"cost_model.tensor_parallel", "--tp"},
                                    {"cost_model.expert_parallel", "--ep"}})
      if (what.compare(0, key.size(), key) == 0) throw ConfigError(flag + what.substr(key.size()));
    throw;
  }
  const RooflineCostModel& m = *built;
  const DecodeCrossover x = m.decode_crossover(a.context);
  const double gib = 1024.0 * 1024.0 * 1024.0;

  std::printf("testbed roofline: %s on %s, tensor_parallel %d%s%s, context %d\n", model.name.c_str(),
              m.hardware().name.c_str(), a.tp, a.ep > 1 ? (", expert_parallel " + std::to_string(a.ep)).c_str() : "",
              model.precision.empty() ? "" : (", precision " + model.precision).c_str(), a.context);
  std::printf("  weights %.2f GiB per GPU, KV %.1f KiB per token per GPU\n", weight_bytes_per_gpu(model, a.tp) / gib,
              kv_bytes_per_token_per_gpu(model, a.tp) / 1024.0);
  long long kv_blocks = 0;
  try {
    const int blocks = kv_blocks_from_memory(m.hardware(), model, a.block_size, a.fraction, a.tp);
    kv_blocks = blocks;
    std::printf("  KV capacity at gpu_memory_fraction %.2f: %d blocks of %d = %lld tokens\n", a.fraction, blocks,
                a.block_size, kv_blocks * a.block_size);
  } catch (const ConfigError& e) {
    std::printf("  KV capacity: none (%s)\n", e.what());
  }
  std::printf("decode crossover (compute time = memory time):\n");
  std::printf("  weight GEMMs:              B* = %s\n", format_batch(x.dense_batch).c_str());
  std::printf("  whole step at context %-5d B* = %s%s\n", a.context, format_batch(x.step_batch).c_str(),
              std::isinf(x.step_batch) ? " (K/V reads grow as fast as FLOPs: decode stays memory-bound)" : "");

  // Each decoding sequence holds its context plus the new token, in whole blocks.
  const long long blocks_per_seq = (a.context + 1 + a.block_size - 1) / a.block_size;
  std::set<int> rows;
  for (int b = 1; b <= a.max_batch; b *= 2) rows.insert(b);
  const int knee = std::isinf(x.dense_batch) ? 0 : static_cast<int>(std::ceil(x.dense_batch));
  if (knee >= 1 && knee <= a.max_batch) rows.insert(knee);
  std::printf("\n%7s %9s %10s %10s %8s %11s %12s  %s\n", "batch", "step_ms", "compute_ms", "memory_ms", "comm_ms",
              "ms/token", "tokens/s", "weight GEMMs");
  for (int b : rows) {
    const StepCost c = m.breakdown(decode_shape(b, a.context));
    std::printf("%7d %9.3f %10.3f %10.3f %8.3f %11.4f %12.0f  %s%s%s\n", b, c.total_s * 1e3, c.compute_s * 1e3,
                c.memory_s * 1e3, c.comm_s * 1e3, c.total_s * 1e3 / b, b / c.total_s,
                c.dense_compute_s() > c.dense_memory_s() ? "compute-bound" : "memory-bound",
                b == knee ? "  <- knee" : "",
                b * blocks_per_seq > kv_blocks ? "  (KV does not fit)" : "");
  }
  if (!a.output.empty()) {
    write_curve(m, a, x);
    std::printf("\ncurve (batch 1..%d) written to %s\n", a.max_batch, a.output.c_str());
  }
  return 0;
}

}  // namespace

TESTBED_COMMAND("roofline", kUsage, "decode crossover batch size, KV capacity and step time vs batch (roofline model)",
                roofline_command);

}  // namespace testbed
