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

std::vector<PoolFacts> pools_of(const FleetCostFacts& f) {
  if (!f.pools.empty()) return f.pools;
  PoolFacts p;
  p.size = f.num_instances;
  p.gpus_per_instance = f.gpus_per_instance;
  return {p};
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / v.size();
}

// Instance-seconds pool `index` was paid for over the run's span [first
// arrival, first arrival + duration]: its size throughout, or, when an
// autoscaler reported its replicas (ScaleSample, the first at t = 0), their
// step function integrated over the span.
double instance_seconds(const RunRecorder& rec, int index, const PoolFacts& p, double duration) {
  std::vector<const ScaleSample*> mine;
  for (const ScaleSample& x : rec.scale_samples())
    if (x.pool == index) mine.push_back(&x);
  if (mine.empty()) return p.size * duration;
  double t0 = INFINITY;
  for (const RequestRecord& r : rec.requests()) t0 = std::min(t0, r.arrival_s);
  for (const CancelRecord& c : rec.cancelled()) t0 = std::min(t0, c.arrival_s);
  if (!std::isfinite(t0)) return 0.0;
  const double t1 = t0 + duration;
  double sum = 0;
  for (size_t k = 0; k < mine.size(); ++k) {
    const double a = std::max(t0, mine[k]->t);
    const double b = std::min(t1, k + 1 < mine.size() ? mine[k + 1]->t : t1);
    if (b > a) sum += mine[k]->paid() * (b - a);
  }
  return sum;
}

// A pool's load over the run: the share of time its instances step, the mean
// share of their KV blocks in use (time-weighted over the whole run; an idle
// instance holds no used block), and the sequences in a step (over busy time).
struct PoolLoad {
  double busy_s = 0, utilization = 0, kv_usage = NAN, batch_size = NAN;
};

PoolLoad pool_load(const RunRecorder& rec, const PoolFacts& p, double paid_s) {
  PoolLoad l;
  double kv = 0, seqs = 0;
  const auto at = [](const std::vector<double>& v, int i) { return static_cast<size_t>(i) < v.size() ? v[i] : 0.0; };
  for (int k = 0; k < p.size; ++k) {
    const int i = p.first_instance + k;
    l.busy_s += at(rec.busy_by_instance(), i);
    kv += at(rec.kv_block_seconds_by_instance(), i);
    seqs += at(rec.seq_seconds_by_instance(), i);
  }
  if (paid_s > 0) l.utilization = l.busy_s / paid_s;
  if (paid_s > 0 && p.kv_blocks_per_instance > 0) l.kv_usage = kv / (static_cast<double>(p.kv_blocks_per_instance) * paid_s);
  if (l.busy_s > 0) l.batch_size = seqs / l.busy_s;
  return l;
}

}  // namespace

void add_fleet_metrics(const RunRecorder& rec, const FleetCostFacts& f, Summary& s) {
  std::vector<double> requests(f.num_instances, 0.0), busy(f.num_instances, 0.0);
  double cached = 0, output_tokens = 0, engine_served = 0, cache_answers = 0;
  for (const RequestRecord& r : rec.requests()) {
    cached += r.cached_tokens;
    output_tokens += r.output_tokens;  // cache answers' too: the client received them
    if (r.instance < 0) {  // answered by the ingress cache
      ++cache_answers;
      continue;
    }
    ++engine_served;
    requests[r.instance] += 1;
  }
  for (size_t i = 0; i < rec.busy_by_instance().size() && i < busy.size(); ++i) busy[i] = rec.busy_by_instance()[i];
  s.set("load_imbalance_requests", max_over_mean(requests));
  s.set("load_imbalance_busy", max_over_mean(busy));
  const double duration = s.get("duration_s");
  const std::vector<PoolFacts> pools = pools_of(f);
  bool uniform = true, scaled = !rec.scale_samples().empty();
  int gpus = 0;
  std::vector<double> paid;  // instance-seconds per pool
  double paid_gpu_s = 0, paid_all = 0;
  for (size_t k = 0; k < pools.size(); ++k) {
    const PoolFacts& p = pools[k];
    uniform &= p.gpus_per_instance == pools.front().gpus_per_instance;
    gpus += p.size * p.gpus_per_instance;
    paid.push_back(instance_seconds(rec, static_cast<int>(k), p, duration));
    paid_gpu_s += paid.back() * p.gpus_per_instance;
    paid_all += paid.back();
  }
  // GPUs of the first instance for every instance when they agree (the same
  // arithmetic as before pools), else instance by instance.
  double busy_gpu_s = rec.busy_s() * pools.front().gpus_per_instance;
  if (!uniform) {
    busy_gpu_s = 0;
    for (const PoolFacts& p : pools)
      for (int k = 0; k < p.size; ++k) busy_gpu_s += busy[p.first_instance + k] * p.gpus_per_instance;
  }
  s.set("gpu_seconds", scaled ? paid_gpu_s : (uniform ? f.num_instances * pools.front().gpus_per_instance : gpus) * duration);
  if (scaled) s.set("replicas_mean", duration > 0 ? paid_all / duration : NAN);  // paid instances, time-weighted
  s.set("busy_gpu_seconds", busy_gpu_s);
  s.set("prefill_flops_avoided", cached * f.flops_per_prompt_token);
  const double finished = static_cast<double>(rec.requests().size());
  // Prefill happens on the ingress pool (the first).
  const int ingress_gpus = pools.front().gpus_per_instance;
  if (f.prefill_s_per_token > 0 && finished > 0) {
    const double saved_s_per_request = cached / finished * f.prefill_s_per_token * ingress_gpus;
    s.set("requests_per_day", f.requests_per_day);
    s.set("gpu_hours_saved_per_day", saved_s_per_request * f.requests_per_day / 3600.0);
  }
  const double busy_per_request = finished > 0 ? busy_gpu_s / finished : NAN;
  s.set("busy_gpu_seconds_per_request", busy_per_request);
  // The ingress cache's answers, each priced at an engine-served request's mean busy GPU time.
  if (cache_answers > 0)
    s.set("ingress_gpu_seconds_saved", engine_served > 0 ? cache_answers * busy_gpu_s / engine_served : NAN);
  s.set("gpu_hours_per_day", busy_per_request * f.requests_per_day / 3600.0);

  // Cost and energy, when every pool's hardware states them.
  const bool priced = std::all_of(pools.begin(), pools.end(), [](const PoolFacts& p) { return p.price_per_gpu_hour > 0; });
  const bool powered = std::all_of(pools.begin(), pools.end(), [](const PoolFacts& p) { return p.power_w_per_gpu > 0; });
  double usd = 0, kwh = 0;
  for (size_t k = 0; k < pools.size(); ++k) {
    const PoolFacts& p = pools[k];
    const double gpu_hours = paid[k] * p.gpus_per_instance / 3600.0;
    usd += gpu_hours * p.price_per_gpu_hour;
    kwh += gpu_hours * p.power_w_per_gpu / 1000.0;
  }
  if (priced) {
    s.set("cost_usd", usd);
    s.set("usd_per_million_output_tokens", output_tokens > 0 ? usd / output_tokens * 1e6 : NAN);
    s.set("usd_per_request", finished > 0 ? usd / finished : NAN);  // cost per generation
  }
  if (powered) {
    s.set("energy_kwh", kwh);
    s.set("output_tokens_per_kwh", kwh > 0 ? output_tokens / kwh : NAN);
  }
  if (pools.size() > 1)
    for (size_t k = 0; k < pools.size(); ++k) {
      const PoolFacts& p = pools[k];
      const PoolLoad l = pool_load(rec, p, paid[k]);
      s.set("pool_" + p.name + "_utilization", l.utilization);
      s.set("pool_" + p.name + "_kv_usage_mean", l.kv_usage);
      s.set("pool_" + p.name + "_batch_size_mean", l.batch_size);
      s.set("pool_" + p.name + "_gpu_seconds", paid[k] * p.gpus_per_instance);
    }

  if (!rec.any_handoff()) return;
  std::vector<double> wait, transfer;
  double bytes = 0, moved = 0, reused = 0;
  for (const RequestRecord& r : rec.requests()) {
    if (r.prefill_instance < 0) continue;
    wait.push_back(r.handoff_wait_s);
    transfer.push_back(r.transfer_s);
    bytes += static_cast<double>(r.transfer_bytes);
    moved += r.transfer_blocks;
    reused += r.reused_blocks;
  }
  s.set("handoff_wait_mean_s", mean(wait));
  s.set("handoff_wait_p99_s", percentile(wait, 99));
  s.set("transfer_mean_s", mean(transfer));
  s.set("transfer_p99_s", percentile(transfer, 99));
  s.set("transfer_gb", bytes / 1e9);
  s.set("transfer_reused_share", moved + reused > 0 ? reused / (moved + reused) : 0.0);
}

void write_fleet_tables(ResultsFile& file, const RunRecorder& rec, const FleetCostFacts& facts, double duration_s) {
  const int n = facts.num_instances;
  std::vector<int64_t> requests(n, 0), prompt(n, 0), cached(n, 0), prefilled(n, 0);
  std::vector<std::vector<double>> ttft(n), e2e(n);
  for (const RequestRecord& r : rec.requests()) {
    if (r.instance < 0) continue;  // answered by the ingress cache
    ++requests[r.instance];
    prompt[r.instance] += r.prompt_tokens;
    cached[r.instance] += r.cached_tokens;
    ttft[r.instance].push_back(r.ttft_s());
    e2e[r.instance].push_back(r.e2e_s());
    if (r.prefill_instance >= 0) ++prefilled[r.prefill_instance];
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
  if (facts.pools.size() > 1) {
    std::vector<std::string> pool(n);
    for (const PoolFacts& p : facts.pools)
      for (int k = 0; k < p.size; ++k) pool[p.first_instance + k] = p.name;
    file.add_column("instances", "pool", pool);
    file.add_column("instances", "prefilled", prefilled);

    // Per pool: busy time, utilisation, KV usage and batch size (pool_load).
    std::vector<std::string> name, role, hardware;
    std::vector<int32_t> size, gpus, blocks;
    std::vector<double> pbusy, gpu_s, putil, kv_mean, batch;
    for (size_t k = 0; k < facts.pools.size(); ++k) {
      const PoolFacts& p = facts.pools[k];
      const double paid = instance_seconds(rec, static_cast<int>(k), p, duration_s);
      const PoolLoad l = pool_load(rec, p, paid);
      name.push_back(p.name);
      role.push_back(p.role);
      hardware.push_back(p.hardware);
      size.push_back(p.size);
      gpus.push_back(p.gpus_per_instance);
      blocks.push_back(p.kv_blocks_per_instance);
      pbusy.push_back(l.busy_s);
      gpu_s.push_back(paid * p.gpus_per_instance);
      putil.push_back(l.utilization);
      kv_mean.push_back(l.kv_usage);
      batch.push_back(l.batch_size);
    }
    file.add_column("pools", "name", name);
    file.add_column("pools", "role", role);
    file.add_column("pools", "hardware", hardware);
    file.add_column("pools", "size", size);
    file.add_column("pools", "gpus_per_instance", gpus);
    file.add_column("pools", "kv_blocks_per_instance", blocks);
    file.add_column("pools", "busy_s", pbusy);
    file.add_column("pools", "gpu_seconds", gpu_s);
    file.add_column("pools", "utilization", putil);
    file.add_column("pools", "kv_usage_mean", kv_mean);
    file.add_column("pools", "batch_size_mean", batch);
  }
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
