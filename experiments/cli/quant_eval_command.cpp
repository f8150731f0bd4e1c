// testbed quant-eval CONFIG.ini [--methods fp8,rtn,gptq,awq] [--groups 32,64,128] [--tokens 256]
//                   [--outliers 0] [--outlier-scale 20] [--output DIR] [--section.key=value ...]
//
// The accuracy cost of quantized execution on the CPU executor: the config's
// model at its own precision is the reference; each method (fp8, and w4a16
// with rtn / gptq / awq at each group size) runs the same fixed token
// sequence (calibration_tokens with its own seed: Zipf-distributed, so token
// frequencies look like text's), and per position the KL divergence
// KL(p_ref || p_quant) of the next-token distributions and whether the top-1
// tokens agree are recorded. Prints a table and writes DIR/quant_eval.csv.
//
// Dummy weights have none of a trained model's outlier channels, which are
// what make activation-aware methods pay. --outliers N sets the two RMSNorm
// weights of N hidden channels of every layer to --outlier-scale, so the
// linears' inputs carry a few large channels, as trained LLMs' do (Dettmers
// et al. 2022, LLM.int8()); it changes the reference model too.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "engine/common/config_error.h"
#include "engine/common/rng.h"
#include "engine/cpu_executor.h"
#include "engine/kv_cache_manager.h"
#include "engine/model/llama_weights.h"
#include "engine/model/quantize_weights.h"
#include "experiments/cli/command.h"
#include "experiments/cli/experiment.h"
#include "experiments/cli/huge_pages.h"

namespace fs = std::filesystem;

namespace testbed {
namespace {

// Next-token logits at every position of `tokens`, one decode step at a time.
std::vector<std::vector<float>> logits_along(const ModelConfig& cfg, LlamaWeights w, const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size()), bs = 16, blocks = (n + bs) / bs + 1;
  CpuExecutor exec(cfg, quantized_weights(cfg, std::move(w), bs), blocks, bs, n + 1);
  KvCacheManager kv(blocks, bs, false);
  Request r;
  r.prompt = {tokens[0]};
  r.max_output_tokens = n + 1;
  Sequence seq(std::move(r));
  std::vector<std::vector<float>> out;
  for (int t = 0; t < n; ++t) {
    if (t > 0) seq.append_token(tokens[t]);
    if (!kv.allocate(seq, 1)) throw std::logic_error("quant-eval: no KV room");
    Batch b;
    b.add(&seq, t, 1);
    exec.execute(b);
    seq.num_computed_tokens = t + 1;
    out.push_back(exec.last_logits());
  }
  return out;
}

void log_softmax(const std::vector<float>& l, std::vector<double>& out) {
  const float m = *std::max_element(l.begin(), l.end());
  double z = 0;
  for (float v : l) z += std::exp(static_cast<double>(v) - m);
  out.resize(l.size());
  for (size_t i = 0; i < l.size(); ++i) out[i] = l[i] - m - std::log(z);
}

int quant_eval_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: testbed quant-eval CONFIG.ini [--methods fp8,rtn,gptq,awq] [--groups 32,64,128] [--tokens 256]\n"
                 "                         [--outliers N] [--outlier-scale S] [--output DIR]\n\n"
                 "KL divergence and top-1 agreement of quantized execution on the CPU executor against the\n"
                 "model at its own precision, over a fixed Zipf-distributed token sequence.\n";
    return args.empty() ? 2 : 0;
  }
  std::string methods = "fp8,rtn,gptq,awq", groups = "32,64,128", output;
  int tokens = 256, outliers = 0;
  double outlier_scale = 20;
  RunConfig config;
  OptionTable table;
  table.add_flag("methods", &methods, "fp8 and/or w4a16 methods rtn, gptq, awq");
  table.add_flag("groups", &groups, "w4a16 group sizes");
  table.add_flag("tokens", &tokens, "positions evaluated");
  table.add_flag("outliers", &outliers, "hidden channels made large in every layer's norms (0: none)");
  table.add_flag("outlier-scale", &outlier_scale, "their norm weight");
  table.add_flag("output", &output, "results directory");
  load_run_config(args[0], {args.begin() + 1, args.end()}, config, table);
  apply_huge_pages(config.driver.huge_pages, /*simulates=*/false);
  print_warnings(config);
  require(config.executor.kind.name == "cpu", "executor.kind", "quant-eval runs the CPU executor (executor.kind = cpu)");
  require(config.model.precision == "auto", "model.precision", "quant-eval sets the precision itself; leave it auto");
  require(tokens >= 2 && tokens <= 4096, "--tokens", "must be in [2, 4096]");
  require(outliers >= 0, "--outliers", "must be >= 0");
  require(std::isfinite(outlier_scale) && outlier_scale > 0, "--outlier-scale", "must be positive");
  const ModelConfig model = ModelConfig::from_json_file(require_file("model.config", config.model.config));
  require(outliers <= model.hidden_size, "--outliers", "more channels than the hidden size");
  std::vector<std::pair<std::string, int>> variants;  // method, group (0 for fp8)
  for (const std::string& m : split_commas(methods)) {
    require(m == "fp8" || m == "rtn" || m == "gptq" || m == "awq", "--methods", "'" + m + "' is not fp8, rtn, gptq or awq");
    if (m == "fp8") {
      variants.push_back({m, 0});
      continue;
    }
    for (const std::string& g : split_commas(groups)) {
      int gv = 0;
      require(parse_value(g, gv) && (gv == 32 || gv == 64 || gv == 128), "--groups", "'" + g + "' is not 32, 64 or 128");
      variants.push_back({m, gv});
    }
  }
  require(!variants.empty(), "--methods", "nothing to evaluate");
  if (output.empty()) output = default_output_dir(args[0], table) + "-quant";
  fs::create_directories(output);

  LlamaWeights weights = load_weights(model, config.model.weights, config.model.seed);
  if (outliers > 0) {
    Rng rng(17);
    std::vector<int> channels(model.hidden_size);
    for (int i = 0; i < model.hidden_size; ++i) channels[i] = i;
    for (int i = model.hidden_size - 1; i > 0; --i) std::swap(channels[i], channels[rng.below(i + 1)]);
    for (LayerWeights& L : weights.layers)
      for (int i = 0; i < outliers; ++i)
        L.attn_norm.data[channels[i]] = L.mlp_norm.data[channels[i]] = static_cast<float>(outlier_scale);
  }
  const std::vector<int32_t> seq = calibration_tokens(model.vocab_size, tokens, 0xE7A1);
  const auto ref = logits_along(model, weights, seq);
  std::printf("quant-eval %s: %s, %d positions%s\n\n%-8s %6s %14s %10s\n", args[0].c_str(), model.name.c_str(), tokens,
              outliers ? (", " + std::to_string(outliers) + " outlier channels").c_str() : "", "method", "group",
              "KL (nats)", "top-1");
  std::ofstream csv(fs::path(output) / "quant_eval.csv");
  csv << "method,group,kl_mean,kl_p90,top1_agreement,positions\n";
  std::vector<double> lr, lq;
  for (const auto& [method, group] : variants) {
    ModelConfig q = model;
    q.precision = method == "fp8" ? "fp8" : "w4a16";
    q.quant_method = method == "fp8" ? "rtn" : method;
    if (group) q.quant_group_size = group;
    const auto got = logits_along(q, weights, seq);
    std::vector<double> kl;
    int agree = 0;
    for (size_t t = 0; t < ref.size(); ++t) {
      log_softmax(ref[t], lr);
      log_softmax(got[t], lq);
      double d = 0;
      for (size_t v = 0; v < lr.size(); ++v) d += std::exp(lr[v]) * (lr[v] - lq[v]);
      kl.push_back(std::max(0.0, d));
      agree += std::max_element(ref[t].begin(), ref[t].end()) - ref[t].begin() ==
               std::max_element(got[t].begin(), got[t].end()) - got[t].begin();
    }
    double mean = 0;
    for (double v : kl) mean += v / kl.size();
    std::vector<double> sorted = kl;
    std::sort(sorted.begin(), sorted.end());
    const double p90 = sorted[static_cast<size_t>(0.9 * (sorted.size() - 1))], top1 = double(agree) / kl.size();
    std::printf("%-8s %6s %14.3e %9.1f%%\n", method.c_str(), group ? std::to_string(group).c_str() : "-", mean, 100 * top1);
    csv << method << "," << group << "," << mean << "," << p90 << "," << top1 << "," << kl.size() << "\n";
  }
  std::printf("\nresults       %s/quant_eval.csv\n", output.c_str());
  return 0;
}

}  // namespace

TESTBED_COMMAND("quant-eval", "quant-eval CONFIG.ini [--methods fp8,rtn,gptq,awq] [--groups 32,64,128]",
                "accuracy of quantized execution on the CPU: KL divergence and top-1 agreement per method",
                quant_eval_command);

}  // namespace testbed
