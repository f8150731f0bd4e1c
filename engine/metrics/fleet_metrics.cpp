#include "engine/metrics/fleet_metrics.h"

#include <algorithm>
#include <cmath>

namespace testbed {
namespace {

double max_over_mean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double sum = 0, mx = 0;
  for (double x : v) {
    sum += x;
    mx = std::max(mx, x);
  }
  return sum > 0 ? mx / (sum / v.size()) : NAN;
}

}  // namespace

void add_fleet_metrics(const RunRecorder& rec, const FleetCostFacts& f, Summary& s) {
  std::vector<double> requests(f.num_instances, 0.0), busy(f.num_instances, 0.0);
  double cached = 0;
  for (const RequestRecord& r : rec.requests()) {
    requests[r.instance] += 1;
    cached += r.cached_tokens;
  }
  for (size_t i = 0; i < rec.busy_by_instance().size() && i < busy.size(); ++i) busy[i] = rec.busy_by_instance()[i];
  s.set("load_imbalance_requests", max_over_mean(requests));
  s.set("load_imbalance_busy", max_over_mean(busy));
  const double duration = s.get("duration_s");
  s.set("gpu_seconds", f.num_instances * f.gpus_per_instance * duration);
  s.set("busy_gpu_seconds", rec.busy_s() * f.gpus_per_instance);
  s.set("prefill_flops_avoided", cached * f.flops_per_prompt_token);
  const double finished = static_cast<double>(rec.requests().size());
  if (f.prefill_s_per_token > 0 && finished > 0) {
    const double saved_s_per_request = cached / finished * f.prefill_s_per_token * f.gpus_per_instance;
    s.set("requests_per_day", f.requests_per_day);
    s.set("gpu_hours_saved_per_day", saved_s_per_request * f.requests_per_day / 3600.0);
  }
  const double busy_per_request = finished > 0 ? rec.busy_s() * f.gpus_per_instance / finished : NAN;
  s.set("busy_gpu_seconds_per_request", busy_per_request);
  s.set("gpu_hours_per_day", busy_per_request * f.requests_per_day / 3600.0);
}

void write_fleet_tables(ResultsFile& file, const RunRecorder& rec, int n, double duration_s) {
  std::vector<int64_t> requests(n, 0), prompt(n, 0), cached(n, 0);
  std::vector<std::vector<double>> ttft(n), e2e(n);
  for (const RequestRecord& r : rec.requests()) {
    ++requests[r.instance];
    prompt[r.instance] += r.prompt_tokens;
    cached[r.instance] += r.cached_tokens;
    ttft[r.instance].push_back(r.ttft_s());
    e2e[r.instance].push_back(r.e2e_s());
  }
  std::vector<int32_t> id(n);
  std::vector<double> hit(n), busy(n, 0.0), util(n), ttft50(n), ttft90(n), e2e50(n);
  for (int i = 0; i < n; ++i) {
    id[i] = i;
    hit[i] = prompt[i] ? static_cast<double>(cached[i]) / prompt[i] : 0.0;
    if (static_cast<size_t>(i) < rec.busy_by_instance().size()) busy[i] = rec.busy_by_instance()[i];
    util[i] = duration_s > 0 ? busy[i] / duration_s : 0.0;
    ttft50[i] = percentile(ttft[i], 50);
    ttft90[i] = percentile(ttft[i], 90);
    e2e50[i] = percentile(e2e[i], 50);
  }
  file.add_column("instances", "instance", id);
  file.add_column("instances", "requests", requests);
  file.add_column("instances", "prompt_tokens", prompt);
  file.add_column("instances", "cached_tokens", cached);
  file.add_column("instances", "prefix_hit_rate", hit);
  file.add_column("instances", "busy_s", busy);
  file.add_column("instances", "utilization", util);
  file.add_column("instances", "ttft_p50_s", ttft50);
  file.add_column("instances", "ttft_p90_s", ttft90);
  file.add_column("instances", "e2e_p50_s", e2e50);
  const auto& samples = rec.samples();
  if (samples.empty()) return;
  std::vector<double> t, kv;
  std::vector<int32_t> inst, waiting, running;
  for (const InstanceSample& x : samples) {
    t.push_back(x.t);
    inst.push_back(x.instance);
    kv.push_back(x.kv_usage);
    waiting.push_back(x.num_waiting);
    running.push_back(x.num_running);
  }
  file.add_column("instance_samples", "t", t);
  file.add_column("instance_samples", "instance", inst);
  file.add_column("instance_samples", "kv_usage", kv);
  file.add_column("instance_samples", "num_waiting", waiting);
  file.add_column("instance_samples", "num_running", running);
}

}  // namespace testbed
