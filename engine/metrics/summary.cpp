#include "engine/metrics/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "engine/common/config_error.h"

namespace testbed {

void SloConfig::validate() const {
  require(ttft_s >= 0, "slo.ttft_s", "must be >= 0 (0 disables it)");
  require(tpot_s >= 0, "slo.tpot_s", "must be >= 0 (0 disables it)");
  require(attainment > 0 && attainment <= 1, "slo.attainment", "must be in (0, 1]");
}

void Summary::set(const std::string& name, double value) {
  for (auto& kv : values_)
    if (kv.first == name) {
      kv.second = value;
      return;
    }
  values_.emplace_back(name, value);
}

double Summary::get(const std::string& name) const {
  for (const auto& kv : values_)
    if (kv.first == name) return kv.second;
  return NAN;
}

bool Summary::has(const std::string& name) const {
  for (const auto& kv : values_)
    if (kv.first == name) return true;
  return false;
}

// Percentiles by selection, not a sort: each needs only the order
// statistics at floor(rank) and the next, and nth_element finds them in
// linear time (the sort of every TTFT, TPOT and E2E value was 2% of a
// single-instance run). ps ascending; the values are the interpolations a
// sorted copy gives, bit for bit.
std::vector<double> percentiles(std::vector<double> v, std::initializer_list<double> ps) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  std::vector<double> out;
  out.reserve(ps.size());
  size_t done = 0;  // v[0, done) holds the smallest `done` values, in order of rank up to there
  for (double p : ps) {
    if (v.empty()) {
      out.push_back(NAN);
      continue;
    }
    const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(rank));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    if (lo >= done) std::nth_element(v.begin() + static_cast<std::ptrdiff_t>(done), v.begin() + static_cast<std::ptrdiff_t>(lo), v.end());
    // Everything after lo is >= v[lo]; the next order statistic is their least.
    if (hi > lo) {
      auto next = std::min_element(v.begin() + static_cast<std::ptrdiff_t>(hi), v.end());
      std::iter_swap(v.begin() + static_cast<std::ptrdiff_t>(hi), next);
    }
    done = hi + 1;
    out.push_back(v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]));
  }
  return out;
}

double percentile(std::vector<double> v, double p) { return percentiles(std::move(v), {p})[0]; }

namespace {

double mean(const std::vector<double>& v) {
  double sum = 0;
  int64_t n = 0;
  for (double x : v)
    if (!std::isnan(x)) {
      sum += x;
      ++n;
    }
  return n ? sum / n : NAN;
}

void add_distribution(Summary& s, const std::string& name, const std::vector<double>& v) {
  s.set(name + "_mean_s", mean(v));
  const std::vector<double> q = percentiles(v, {50, 90, 95, 99});
  const char* names[] = {"_p50_s", "_p90_s", "_p95_s", "_p99_s"};
  for (int i = 0; i < 4; ++i) s.set(name + names[i], q[i]);
}

}  // namespace

Summary summarize(const RunRecorder& rec, int num_instances, const SloConfig& slo) {
  const auto& reqs = rec.requests();
  Summary s;
  s.set("num_requests", static_cast<double>(rec.num_arrived()));
  s.set("num_finished", static_cast<double>(reqs.size()));
  // Requests that ended unfinished (engine/metrics/run_recorder.h: CancelRecord).
  int64_t by_reason[4] = {0, 0, 0, 0};
  double wasted_tokens = 0;
  for (const CancelRecord& c : rec.cancelled()) {
    ++by_reason[static_cast<int>(c.reason)];
    wasted_tokens += c.output_tokens;
  }
  s.set("num_cancelled", static_cast<double>(by_reason[0] + by_reason[1]));
  s.set("num_lost", static_cast<double>(by_reason[2]));
  s.set("num_rejected", static_cast<double>(by_reason[3]));
  s.set("cancelled_output_tokens", wasted_tokens);
  std::vector<double> ttft, tpot, e2e, normalized;
  double prompt = 0, cached = 0, output = 0, preemptions = 0, restarts = 0, first = INFINITY, last = -INFINITY;
  int64_t good = 0, with_hit = 0;
  for (const RequestRecord& r : reqs) {
    if (r.cached_tokens > 0) ++with_hit;
    ttft.push_back(r.ttft_s());
    tpot.push_back(r.tpot_s());
    e2e.push_back(r.e2e_s());
    if (r.output_tokens > 0) normalized.push_back(r.e2e_s() / r.output_tokens);
    prompt += r.prompt_tokens;
    cached += r.cached_tokens;
    output += r.output_tokens;
    preemptions += r.preemptions;
    restarts += r.restarts;
    first = std::min(first, r.arrival_s);
    last = std::max(last, r.finish_s);
    const bool ttft_ok = slo.ttft_s <= 0 || r.ttft_s() <= slo.ttft_s;
    const bool tpot_ok = slo.tpot_s <= 0 || std::isnan(r.tpot_s()) || r.tpot_s() <= slo.tpot_s;
    if (ttft_ok && tpot_ok) ++good;
  }
  const double duration = reqs.empty() ? 0.0 : last - first;
  s.set("duration_s", duration);
  s.set("prompt_tokens", prompt);
  s.set("cached_tokens", cached);
  s.set("output_tokens", output);
  s.set("prefix_hit_rate", prompt > 0 ? cached / prompt : 0.0);
  s.set("request_hit_share", reqs.empty() ? 0.0 : static_cast<double>(with_hit) / reqs.size());  // requests with any hit
  add_distribution(s, "ttft", ttft);
  add_distribution(s, "tpot", tpot);
  add_distribution(s, "e2e", e2e);
  add_distribution(s, "normalized_latency", normalized);  // E2E per output token (Orca's, vLLM's "normalized latency")
  const LogHistogram& itl = rec.itl();
  s.set("itl_mean_s", itl.mean());
  for (int p : {50, 90, 99}) s.set("itl_p" + std::to_string(p) + "_s", itl.quantile(p / 100.0));
  s.set("throughput_tok_s", duration > 0 ? output / duration : 0.0);
  s.set("request_throughput_rps", duration > 0 ? reqs.size() / duration : 0.0);
  s.set("goodput_rps", duration > 0 ? good / duration : 0.0);
  const double attained = reqs.empty() ? 0.0 : static_cast<double>(good) / reqs.size();
  s.set("slo_attainment", attained);
  s.set("meets_slo", attained >= slo.attainment ? 1.0 : 0.0);
  s.set("preemptions", preemptions);
  s.set("restarts", restarts);  // finished requests' restarts after instance failures
  // The ingress cache: answers by kind over every request that arrived.
  int64_t exact = 0, semantic = 0, false_hits = 0;
  for (const RequestRecord& r : reqs) {
    exact += r.answered_by == 1;
    semantic += r.answered_by == 2;
    false_hits += r.false_hit;
  }
  if (exact + semantic > 0) {
    const double n = static_cast<double>(rec.num_arrived());
    s.set("ingress_exact_hit_rate", exact / n);
    s.set("ingress_semantic_hit_rate", semantic / n);
    s.set("ingress_false_hit_rate", false_hits / n);
  }
  // Wall-clock runs: the measured embedding + lookup of every request the ingress saw.
  if (!rec.ingress_seconds().empty()) {
    double sum = 0;
    for (double x : rec.ingress_seconds()) sum += x;
    s.set("ingress_lookup_mean_s", sum / static_cast<double>(rec.ingress_seconds().size()));
    s.set("ingress_lookup_p99_s", percentile(rec.ingress_seconds(), 99));
  }
  // Model routing: the share of requests a lower class's pool served, and of quality failures.
  int64_t routed = 0, below = 0, above = 0, failed = 0;
  for (const RequestRecord& r : reqs) {
    if (r.routed_class < 0) continue;
    ++routed;
    below += r.routed_class < r.request_class;
    above += r.routed_class > r.request_class;
    failed += r.quality_failure;
  }
  if (routed > 0) {
    s.set("routed_below_class_share", static_cast<double>(below) / routed);
    s.set("routed_above_class_share", static_cast<double>(above) / routed);
    s.set("quality_failure_rate", static_cast<double>(failed) / routed);
  }
  if (rec.spec_drafted() > 0) {  // speculative runs only
    s.set("spec_acceptance_rate", static_cast<double>(rec.spec_accepted()) / rec.spec_drafted());
    s.set("spec_tokens_per_step",
          rec.decode_items() > 0 ? static_cast<double>(rec.decode_appended()) / rec.decode_items() : NAN);
  }
  s.set("num_steps", static_cast<double>(rec.num_steps()));
  // Time-weighted over busy steps: the sequences a step carries, and the share of
  // allocated KV slots holding no token (reservation and the last block's unused
  // part; each sequence's tokens count, so shared prefix blocks lower it).
  s.set("batch_size_mean", rec.busy_s() > 0 ? rec.seq_seconds() / rec.busy_s() : NAN);
  s.set("kv_waste_mean", rec.kv_slot_seconds() > 0 ? 1.0 - rec.kv_token_seconds() / rec.kv_slot_seconds() : NAN);
  s.set("num_instances", num_instances);
  s.set("busy_gpu_seconds", rec.busy_s());
  s.set("gpu_seconds", num_instances * duration);
  s.set("kv_blocks_stored", static_cast<double>(rec.num_blocks_stored()));
  s.set("kv_blocks_removed", static_cast<double>(rec.num_blocks_removed()));
  return s;
}

std::string format_summary(const Summary& s) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "requests      %.0f finished of %.0f, %.0f preemptions, %.2f s\n"
                "throughput    %.1f output tok/s, %.3f req/s, goodput %.3f req/s\n"
                "prefix hits   %.1f%% of prompt tokens (%.0f of %.0f)\n"
                "TTFT  (s)     mean %.4f  p50 %.4f  p90 %.4f  p99 %.4f\n"
                "TPOT  (s)     mean %.4f  p50 %.4f  p90 %.4f  p99 %.4f\n"
                "E2E   (s)     mean %.4f  p50 %.4f  p90 %.4f  p99 %.4f\n",
                s.get("num_finished"), s.get("num_requests"), s.get("preemptions"), s.get("duration_s"),
                s.get("throughput_tok_s"), s.get("request_throughput_rps"), s.get("goodput_rps"),
                100.0 * s.get("prefix_hit_rate"), s.get("cached_tokens"), s.get("prompt_tokens"),
                s.get("ttft_mean_s"), s.get("ttft_p50_s"), s.get("ttft_p90_s"), s.get("ttft_p99_s"),
                s.get("tpot_mean_s"), s.get("tpot_p50_s"), s.get("tpot_p90_s"), s.get("tpot_p99_s"),
                s.get("e2e_mean_s"), s.get("e2e_p50_s"), s.get("e2e_p90_s"), s.get("e2e_p99_s"));
  std::string out = buf;
  if (s.get("num_cancelled") > 0 || s.get("num_lost") > 0 || s.get("num_rejected") > 0) {
    std::snprintf(buf, sizeof buf,
                  "cancelled     %.0f by their clients, %.0f lost to failures, %.0f rejected (could never run; %.0f "
                  "output tokens wasted)\n",
                  s.get("num_cancelled"), s.get("num_lost"), s.get("num_rejected"), s.get("cancelled_output_tokens"));
    out += buf;
  }
  if (s.has("transfer_mean_s")) {
    std::snprintf(buf, sizeof buf,
                  "hand-offs     KV transfer mean %.4f s p99 %.4f s (%.3f GB, %.0f%% of blocks already on the "
                  "decode side), wait for room mean %.4f s p99 %.4f s\n",
                  s.get("transfer_mean_s"), s.get("transfer_p99_s"), s.get("transfer_gb"),
                  100.0 * s.get("transfer_reused_share"), s.get("handoff_wait_mean_s"), s.get("handoff_wait_p99_s"));
    out += buf;
  }
  if (s.has("ingress_lookup_mean_s")) {
    std::snprintf(buf, sizeof buf,
                  "ingress       %.1f%% exact and %.1f%% semantic hits (%.1f%% false), lookup (embed + search) mean "
                  "%.4f s p99 %.4f s\n",
                  100.0 * std::max(0.0, s.get("ingress_exact_hit_rate")),
                  100.0 * std::max(0.0, s.get("ingress_semantic_hit_rate")),
                  100.0 * std::max(0.0, s.get("ingress_false_hit_rate")), s.get("ingress_lookup_mean_s"),
                  s.get("ingress_lookup_p99_s"));
    out += buf;
  }
  if (s.has("cost_usd")) {
    std::snprintf(buf, sizeof buf, "cost          $%.4f (%.3f $ per M output tokens)%s\n", s.get("cost_usd"),
                  s.get("usd_per_million_output_tokens"),
                  s.has("energy_kwh") ? (", " + std::to_string(s.get("energy_kwh")) + " kWh at TDP").c_str() : "");
    out += buf;
  }
  return out;
}

}  // namespace testbed
