#include "sim/calibration.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>

#include "engine/common/config_error.h"
#include "traces/csv_fields.h"
#include "traces/trace_format.h"
#include "sim/roofline_cost_model.h"

namespace testbed {
namespace {

FitQuality quality(const std::vector<double>& rel) {
  FitQuality q;
  q.samples = static_cast<int>(rel.size());
  if (rel.empty()) return q;
  std::vector<double> a(rel.size());
  for (size_t i = 0; i < rel.size(); ++i) a[i] = std::abs(rel[i]);
  std::sort(a.begin(), a.end());
  auto at = [&](double p) { return a[std::min(a.size() - 1, static_cast<size_t>(p * (a.size() - 1) + 0.5))]; };
  q.median_abs_rel = at(0.5);
  q.p90_abs_rel = at(0.9);
  return q;
}

double combine(double c, double m, double p) {
  const double hi = std::max(c, m), lo = std::min(c, m);
  if (hi <= 0) return 0;
  return hi * std::pow(1.0 + std::pow(lo / hi, p), 1.0 / p);
}

// Reads a CSV: the header's columns by name, then each data row; calls `row`
// with a field getter. Errors name path:line.
template <class Fn>
void read_csv(const std::string& path, Fn row) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open profile");
  std::string line, header_line;
  int lineno = 0;
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    try {
      std::vector<std::string_view> f = split_csv(line);
      if (header.empty()) {
        header.assign(f.begin(), f.end());
        continue;
      }
      std::vector<std::string_view> h(header.begin(), header.end());
      if (f.size() != h.size())
        throw ConfigError(path + ":" + std::to_string(lineno) + ": " + std::to_string(f.size()) +
                          " fields, the header has " + std::to_string(h.size()));
      row([&](const char* name) { return f[csv_column(h, name)]; }, [&](const char* name) {
        for (const auto& c : h)
          if (c == name) return true;
        return false;
      });
    } catch (const TraceParseError& e) {
      throw ConfigError(path + ":" + std::to_string(lineno) + ": " + e.what());
    }
  }
  if (header.empty()) throw ConfigError(path + ": empty profile");
}

bool parse_bool(std::string_view v, const char* column) {
  if (v == "True" || v == "true" || v == "1") return true;
  if (v == "False" || v == "false" || v == "0") return false;
  throw TraceParseError(std::string(column) + ": '" + std::string(v) + "' is not a boolean");
}

}  // namespace

namespace {

// Levenberg-Marquardt on residuals r(x) within box bounds [lo, hi] (numeric
// Jacobian, central differences). Returns x; `r` holds the final residuals.
Eigen::VectorXd levenberg_marquardt(Eigen::VectorXd x, const Eigen::VectorXd& lo, const Eigen::VectorXd& hi,
                                    const std::function<void(const Eigen::VectorXd&, Eigen::VectorXd&)>& residuals,
                                    Eigen::VectorXd& r) {
  const Eigen::Index n = x.size();
  Eigen::VectorXd r_try, ra, rb;
  residuals(x, r);
  double cost = r.squaredNorm(), lambda = 1e-3;
  Eigen::MatrixXd J(r.size(), n);
  for (int it = 0; it < 200; ++it) {
    for (Eigen::Index k = 0; k < n; ++k) {
      const double h = 1e-6 * std::max(1.0, std::abs(x[k]));
      Eigen::VectorXd a = x, b = x;
      a[k] = std::min(hi[k], a[k] + h);
      b[k] = std::max(lo[k], b[k] - h);
      residuals(a, ra);
      residuals(b, rb);
      J.col(k) = (ra - rb) / (a[k] - b[k]);
    }
    const Eigen::MatrixXd JtJ = J.transpose() * J;
    const Eigen::VectorXd g = J.transpose() * r;
    bool improved = false;
    for (int tries = 0; tries < 20 && !improved; ++tries) {
      Eigen::MatrixXd A = JtJ;
      A.diagonal() += lambda * JtJ.diagonal().cwiseMax(1e-12);
      const Eigen::VectorXd next = (x + A.ldlt().solve(-g)).cwiseMax(lo).cwiseMin(hi);
      residuals(next, r_try);
      const double c = r_try.squaredNorm();
      if (c < cost) {
        improved = true;
        const double gain = cost - c;
        x = next;
        r = r_try;
        cost = c;
        lambda = std::max(lambda / 3, 1e-12);
        if (gain < 1e-12 * (1 + cost)) return x;  // converged
      } else {
        lambda *= 4;
      }
    }
    if (!improved) break;
  }
  return x;
}

}  // namespace

GemmFit fit_gemms(const std::vector<OpSample>& s, double P, double W) {
  if (s.size() < 4) throw ConfigError("calibrate: fewer than 4 GEMM samples to fit");
  // Parameters: kernel_s (in microseconds, for scale), compute and memory efficiency, overlap exponent.
  Eigen::VectorXd x(4), lo(4), hi(4), r;
  x << 5.0, 0.8, 0.9, 2.0;
  lo << 0.0, 0.02, 0.02, 1.0;
  hi << 100.0, 1.0, 1.0, 64.0;
  x = levenberg_marquardt(x, lo, hi, [&](const Eigen::VectorXd& p, Eigen::VectorXd& out) {
    out.resize(static_cast<Eigen::Index>(s.size()));
    for (size_t i = 0; i < s.size(); ++i) {
      const double t = p[0] * 1e-6 + combine(s[i].flops / (P * p[1]), s[i].bytes / (W * p[2]), p[3]);
      out[static_cast<Eigen::Index>(i)] = (t - s[i].seconds) / s[i].seconds;
    }
  }, r);
  GemmFit f;
  f.kernel_s = x[0] * 1e-6;
  f.compute_efficiency = x[1];
  f.memory_efficiency = x[2];
  f.overlap_exponent = x[3];
  f.quality = quality(std::vector<double>(r.data(), r.data() + r.size()));
  return f;
}

StepFit fit_step_profile(const ProfileTable& table, const ModelConfig& model, int tp, const HardwareSpec& base) {
  // The profiled shapes (sim/executor_profiler.cpp): a prompt chunk of P
  // tokens after C cached ones, and D sequences decoding over C tokens.
  std::vector<StepShape> shapes;
  std::vector<double> seconds;
  for (size_t p = 0; p < table.prefill_tokens.size(); ++p)
    for (size_t d = 0; d < table.decode_seqs.size(); ++d)
      for (size_t c = 0; c < table.context.size(); ++c) {
        const int P = static_cast<int>(table.prefill_tokens[p]), D = static_cast<int>(table.decode_seqs[d]);
        const int C = static_cast<int>(table.context[c]);
        const double t = table.step_s[table.index(p, d, c)];
        if (P + D == 0 || !(t > 0)) continue;
        StepShape s;
        if (P > 0) s.push_back(SeqShape{C, P, true, false, 0});
        for (int i = 0; i < D; ++i) s.push_back(SeqShape{std::max(C, 1), 1, true, true, 0});
        shapes.push_back(std::move(s));
        seconds.push_back(t);
      }
  if (shapes.size() < 5) throw ConfigError("calibrate: fewer than 5 profiled steps to fit");
  // Parameters: compute, memory, K/V read and attention efficiency, step overhead (ms).
  Eigen::VectorXd x(5), lo(5), hi(5), r;
  x << base.compute_efficiency, base.memory_efficiency,
      base.kv_read_efficiency > 0 ? base.kv_read_efficiency : base.memory_efficiency, base.attention_efficiency,
      base.step_overhead_s * 1e3;
  lo << 0.01, 0.01, 0.01, 0.01, 0.0;
  hi << 1.0, 1.0, 1.0, 1.0, 100.0;
  auto spec = [&](const Eigen::VectorXd& p) {
    HardwareSpec h = base;
    h.compute_efficiency = p[0];
    h.memory_efficiency = p[1];
    h.kv_read_efficiency = p[2];
    h.attention_efficiency = p[3];
    h.step_overhead_s = p[4] * 1e-3;
    return h;
  };
  x = levenberg_marquardt(x, lo, hi, [&](const Eigen::VectorXd& p, Eigen::VectorXd& out) {
    const RooflineCostModel m(spec(p), model, tp);
    out.resize(static_cast<Eigen::Index>(shapes.size()));
    for (size_t i = 0; i < shapes.size(); ++i)
      out[static_cast<Eigen::Index>(i)] = (m.predict(shapes[i]) - seconds[i]) / seconds[i];
  }, r);
  const HardwareSpec h = spec(x);
  StepFit f;
  f.compute_efficiency = h.compute_efficiency;
  f.memory_efficiency = h.memory_efficiency;
  f.kv_read_efficiency = h.kv_read_efficiency;
  f.attention_efficiency = h.attention_efficiency;
  f.step_overhead_s = h.step_overhead_s;
  f.quality = quality(std::vector<double>(r.data(), r.data() + r.size()));
  return f;
}

LineFit fit_line_relative(const std::vector<std::pair<double, double>>& xy) {
  if (xy.size() < 2) throw ConfigError("calibrate: fewer than 2 samples for a line fit");
  // Weighted least squares: minimise sum ((a + b x - y) / y)^2.
  double s00 = 0, s01 = 0, s11 = 0, t0 = 0, t1 = 0;
  for (const auto& [x, y] : xy) {
    const double w = 1.0 / (y * y);
    s00 += w, s01 += w * x, s11 += w * x * x, t0 += w * y, t1 += w * x * y;
  }
  const double det = s00 * s11 - s01 * s01;
  LineFit f;
  if (det > 0) {
    f.intercept = (t0 * s11 - t1 * s01) / det;
    f.slope = (s00 * t1 - s01 * t0) / det;
  } else {
    f.intercept = t0 / s00;
  }
  std::vector<double> rel;
  for (const auto& [x, y] : xy) rel.push_back((f.intercept + f.slope * x - y) / y);
  f.quality = quality(rel);
  return f;
}

VidurOpProfile read_vidur_mlp_csv(const std::string& path) {
  VidurOpProfile p;
  const char* ops[] = {"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "input_layernorm",
                       "post_attention_layernorm", "attn_rope", "mlp_act", "add"};
  read_csv(path, [&](auto field, auto) {
    VidurOpProfile::Row r;
    auto positive = [&](const char* c) {
      const int64_t v = parse_int_field(field(c), c);
      if (v <= 0 || v > (1 << 24)) throw TraceParseError(std::string(c) + ": must be in [1, 2^24]");
      return static_cast<int>(v);
    };
    r.heads = positive("n_head");
    r.kv_heads = positive("n_kv_head");
    r.hidden = positive("n_embd");
    r.inter = positive("n_expanded_embd");
    r.tokens = positive("num_tokens");
    r.tp = positive("num_tensor_parallel_workers");
    r.gated = parse_bool(field("use_gated_mlp"), "use_gated_mlp");
    if (r.hidden % r.heads != 0 || r.heads % r.tp != 0)
      throw TraceParseError("n_head: does not split n_embd or num_tensor_parallel_workers evenly");
    for (const char* op : ops) {
      const std::string col = std::string("time_stats.") + op + ".median";
      const double ms = parse_double_field(field(col.c_str()), col);
      if (!(ms > 0) || !std::isfinite(ms)) throw TraceParseError(col + ": must be positive");
      r.seconds[op] = ms * 1e-3;
    }
    p.rows.push_back(std::move(r));
  });
  if (p.rows.empty()) throw ConfigError(path + ": no profile rows");
  return p;
}

namespace {

struct RowDims {
  double T, h, q, kv, I;
};

RowDims dims(const VidurOpProfile::Row& r) {
  const double d = static_cast<double>(r.hidden) / r.heads;
  RowDims x;
  x.T = r.tokens;
  x.h = r.hidden;
  x.q = static_cast<double>(r.heads) / r.tp * d;
  x.kv = (r.kv_heads >= r.tp ? static_cast<double>(r.kv_heads) / r.tp : 1.0) * d;
  x.I = static_cast<double>(r.inter) / r.tp;
  return x;
}

}  // namespace

std::vector<OpSample> vidur_gemm_samples(const VidurOpProfile& p) {
  std::vector<OpSample> out;
  const double b = 2;  // 16-bit weights and activations
  for (const VidurOpProfile::Row& r : p.rows) {
    const RowDims x = dims(r);
    const double up = r.gated ? 2 * x.I : x.I;
    const std::pair<const char*, std::pair<double, double>> gemms[] = {{"attn_pre_proj", {x.h, x.q + 2 * x.kv}},
                                                                      {"attn_post_proj", {x.q, x.h}},
                                                                      {"mlp_up_proj", {x.h, up}},
                                                                      {"mlp_down_proj", {x.I, x.h}}};
    for (const auto& [op, kn] : gemms) {
      const auto [k, n] = kn;
      out.push_back({2 * x.T * k * n, (k * n + x.T * k + x.T * n) * b, r.seconds.at(op)});
    }
  }
  return out;
}

std::map<std::string, std::vector<OpSample>> vidur_elementwise_samples(const VidurOpProfile& p) {
  std::map<std::string, std::vector<OpSample>> out;
  const double b = 2;
  for (const VidurOpProfile::Row& r : p.rows) {
    const RowDims x = dims(r);
    const double up = r.gated ? 2 * x.I : x.I;
    out["input_layernorm"].push_back({0, (2 * x.T * x.h + x.h) * b, r.seconds.at("input_layernorm")});
    out["post_attention_layernorm"].push_back({0, (2 * x.T * x.h + x.h) * b, r.seconds.at("post_attention_layernorm")});
    out["attn_rope"].push_back({0, 2 * x.T * (x.q + x.kv) * b, r.seconds.at("attn_rope")});
    out["mlp_act"].push_back({0, x.T * (up + x.I) * b, r.seconds.at("mlp_act")});
    out["add"].push_back({0, 3 * x.T * x.h * b, r.seconds.at("add")});
  }
  return out;
}

std::map<int, std::vector<std::pair<double, double>>> read_vidur_all_reduce_csv(const std::string& path) {
  std::map<int, std::vector<std::pair<double, double>>> out;
  read_csv(path, [&](auto field, auto) {
    const int64_t n = parse_int_field(field("num_workers"), "num_workers");
    const int64_t per_node = parse_int_field(field("devices_per_node"), "devices_per_node");
    const double bytes = parse_double_field(field("size"), "size");
    const double ms = parse_double_field(field("time_stats.all_reduce.median"), "time_stats.all_reduce.median");
    if (n < 2 || n > 1024) throw TraceParseError("num_workers: must be in [2, 1024]");
    if (!(bytes > 0) || !(ms > 0)) throw TraceParseError("size, time_stats.all_reduce.median: must be positive");
    if (per_node != n) return;  // across nodes: not a TP group
    out[static_cast<int>(n)].push_back({bytes, ms * 1e-3});
  });
  if (out.empty()) throw ConfigError(path + ": no all-reduce within one node");
  return out;
}

AttentionSamples read_attention_profiles(const std::string& dir) {
  AttentionSamples a;
  read_csv(dir + "/decode_profile.csv", [&](auto field, auto) {
    if (field("kernel") != "paged_decode") return;
    const double us = parse_double_field(field("time_us"), "time_us"), bytes = parse_double_field(field("bytes"), "bytes");
    if (!(us > 0) || !(bytes > 0)) throw TraceParseError("time_us, bytes: must be positive");
    a.decode.push_back({0, bytes, us * 1e-6});
  });
  read_csv(dir + "/prefill_profile.csv", [&](auto field, auto) {
    if (field("kernel") != "paged_prefill") return;
    const double us = parse_double_field(field("time_us"), "time_us"), tflops = parse_double_field(field("tflops"), "tflops");
    if (!(us > 0) || !(tflops > 0)) throw TraceParseError("time_us, tflops: must be positive");
    a.prefill.push_back({tflops * 1e12 * us * 1e-6, 0, us * 1e-6});
  });
  if (a.decode.empty() && a.prefill.empty())
    throw ConfigError(dir + ": no paged_decode or paged_prefill rows in decode_profile.csv / prefill_profile.csv");
  return a;
}

FitQuality fit_share(const std::vector<std::pair<double, double>>& ws, double peak, double& share) {
  // t = w / (peak s): with a_i = w_i / (peak t_i), minimise sum (a_i x - 1)^2 over x = 1 / s.
  double num = 0, den = 0;
  for (const auto& [w, t] : ws) {
    const double a = w / (peak * t);
    num += a, den += a * a;
  }
  if (ws.empty() || den <= 0) throw ConfigError("calibrate: no samples to fit a share of the peak");
  share = den / num;
  std::vector<double> rel;
  for (const auto& [w, t] : ws) rel.push_back((w / (peak * share) - t) / t);
  return quality(rel);
}

}  // namespace testbed
