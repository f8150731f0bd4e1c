// Fleet: autoscaling (sim/autoscaler.h). Every autoscale.interval_s a pool's
// signals are measured over its window, its policy asks for a replica count,
// and replicas start (after start-up), drain, or go off.
#include <algorithm>

#include "engine/metrics/summary.h"
#include "sim/fleet.h"
#include "sim/fleet_state.h"

namespace testbed {

bool Fleet::requests_outstanding() const {
  return !source_done_ || added_ > finished_ + cancelled_ + lost_ + rejected_;
}

void Fleet::measure(Pool& pool, double now, AutoscaleSignals& s) {
  const AutoscaleConfig& a = pool.spec.autoscale;
  const double from = now - a.window_s;
  Pool::Tick tick{now, 0, 0, 0, 0, 0, 0};
  for (size_t k = 0; k < pool.spec.engines.size(); ++k) {
    const Instance& inst = *instances_[pool.first + static_cast<int>(k)];
    tick.busy_s += inst.busy_s;
    if (inst.failed || inst.state != Instance::State::Active) continue;
    const Engine& e = *inst.engine;
    ++tick.active;
    tick.queue += e.scheduler().num_waiting();
    tick.running += e.scheduler().num_running();
    tick.kv += e.kv_cache().usage();
    tick.holding += e.has_unfinished() ? 1 : 0;
  }
  pool.ticks.push_back(tick);
  // The window: the ticks after `from`, and the one at its start for the busy-time difference.
  while (pool.ticks.size() > 1 && pool.ticks[1].t <= from) pool.ticks.pop_front();
  while (!pool.arrivals.empty() && pool.arrivals.front() <= from) pool.arrivals.pop_front();
  while (!pool.ttfts.empty() && pool.ttfts.front().first <= from) pool.ttfts.pop_front();
  double replica_ticks = 0, replica_seconds = 0;
  for (size_t k = 0; k < pool.ticks.size(); ++k) {
    const Pool::Tick& t = pool.ticks[k];
    if (t.t <= from && pool.ticks.size() > 1) continue;
    replica_ticks += t.active;
    s.queue_depth += t.queue;
    s.active_seqs += t.running;
    s.kv_usage += t.kv;
    s.cpu_util += t.holding;
    if (k > 0) replica_seconds += t.active * (t.t - pool.ticks[k - 1].t);
  }
  if (replica_ticks > 0) {
    s.queue_depth /= replica_ticks;
    s.active_seqs /= replica_ticks;
    s.kv_usage /= replica_ticks;
    s.cpu_util /= replica_ticks;
  }
  const double busy = pool.ticks.back().busy_s - pool.ticks.front().busy_s;
  s.gpu_util = replica_seconds > 0 ? std::min(1.0, busy / replica_seconds) : 0.0;
  const double active_now = std::max(1, tick.active);
  s.request_rate = pool.arrivals.size() / std::min(a.window_s, std::max(now, 1e-9)) / active_now;
  std::vector<double> t;
  for (const auto& x : pool.ttfts) t.push_back(x.second);
  s.ttft_p95 = t.empty() ? 0.0 : percentile(t, 95);
}

Fleet::ReplicaCount Fleet::count_replicas(const Pool& pool) const {
  ReplicaCount c;
  for (size_t k = 0; k < pool.spec.engines.size(); ++k) {
    const Instance& inst = *instances_[pool.first + static_cast<int>(k)];
    if (inst.failed) continue;
    c.active += inst.state == Instance::State::Active;
    c.starting += inst.state == Instance::State::Starting;
    c.draining += inst.state == Instance::State::Draining;
  }
  return c;
}

void Fleet::evaluate(int p, double now) {
  Pool& pool = *pools_[p];
  const AutoscaleConfig& a = pool.spec.autoscale;
  const int size = static_cast<int>(pool.spec.engines.size());
  AutoscaleSignals s;
  measure(pool, now, s);
  const ReplicaCount before = count_replicas(pool);
  const int current = before.active + before.starting;  // draining ones are on their way out
  const double signal = s.get(a.signal);
  // The first evaluation has no window behind it yet (no busy time to divide): it changes nothing.
  const int asked = pool.ticks.size() < 2 ? current : pool.policy->desired(current, signal);
  int desired = std::max(a.min_replicas, std::min(a.max_for(size), asked));
  // Scale-down goes no lower than the highest recommendation of the last
  // cooldown_s (HPA's scale-down stabilisation window): one quiet moment does not empty the pool.
  pool.recommendations.emplace_back(now, desired);
  while (pool.recommendations.front().first <= now - a.cooldown_s) pool.recommendations.pop_front();
  if (desired < current) {
    int highest = desired;
    for (const auto& r : pool.recommendations) highest = std::max(highest, r.second);
    desired = std::min(current, highest);
  }
  if (desired > current) scale_up(pool, desired - current, now);
  if (desired < current) scale_down(pool, current - desired, now);
  report_scale(p, now, desired, signal, s);
  if (requests_outstanding()) loop_.at(now + a.interval_s, kRankControl, [this, p](double t) { evaluate(p, t); });
}

void Fleet::report_scale(int p, double now, int desired, double signal, const AutoscaleSignals& s) {
  if (!options_.sink) return;
  const Pool& pool = *pools_[p];
  ScaleSample x;
  x.t = now;
  x.pool = p;
  const ReplicaCount c = count_replicas(pool);  // after the change
  x.active = c.active;
  x.starting = c.starting;
  x.draining = c.draining;
  x.desired = desired;
  x.signal = signal;
  x.queue_depth = s.queue_depth;
  x.active_seqs = s.active_seqs;
  x.kv_usage = s.kv_usage;
  x.gpu_util = s.gpu_util;
  x.cpu_util = s.cpu_util;
  x.request_rate = s.request_rate;
  x.ttft_p95 = s.ttft_p95;
  options_.sink->on_scale(x);
}

void Fleet::scale_up(Pool& pool, int n, double now) {
  const int size = static_cast<int>(pool.spec.engines.size());
  // A draining replica is warm: it takes requests again at once.
  for (int k = 0; k < size && n > 0; ++k) {
    Instance& inst = *instances_[pool.first + k];
    if (!inst.failed && inst.state == Instance::State::Draining) {
      touch(pool.first + k);
      inst.state = Instance::State::Active;
      log(RequestEvent::Kind::ReplicaReady, now, -1, pool.first + k);
      --n;
    }
  }
  for (int k = 0; k < size && n > 0; ++k) {
    Instance& inst = *instances_[pool.first + k];
    if (inst.failed || inst.state != Instance::State::Off) continue;
    const int i = pool.first + k;
    touch(i);
    inst.state = Instance::State::Starting;
    log(RequestEvent::Kind::ReplicaStart, now, -1, i);
    loop_.at(now + pool.spec.startup_s, kRankTransfer, [this, i, token = ++inst.starts](double t) {
      if (instances_[i]->starts == token) start_replica(i, t);
    });
    --n;
  }
}

void Fleet::start_replica(int i, double now) {
  Instance& inst = *instances_[i];
  if (inst.failed || inst.state != Instance::State::Starting) return;
  touch(i);
  inst.state = Instance::State::Active;
  log(RequestEvent::Kind::ReplicaReady, now, -1, i);
  kick(i, now);
}

void Fleet::scale_down(Pool& pool, int n, double now) {
  const int size = static_cast<int>(pool.spec.engines.size());
  // Starting replicas first (nothing on them yet), then the least loaded active ones, newest first on ties.
  for (int k = size - 1; k >= 0 && n > 0; --k) {
    Instance& inst = *instances_[pool.first + k];
    if (!inst.failed && inst.state == Instance::State::Starting) {
      touch(pool.first + k);
      inst.state = Instance::State::Off;
      log(RequestEvent::Kind::ReplicaOff, now, -1, pool.first + k);
      --n;
    }
  }
  while (n > 0) {
    int best = -1, best_load = 0;
    for (int k = size - 1; k >= 0; --k) {
      const Instance& inst = *instances_[pool.first + k];
      if (inst.failed || inst.state != Instance::State::Active) continue;
      const int load = inst.engine->scheduler().num_waiting() + inst.engine->scheduler().num_running();
      if (best < 0 || load < best_load) best = k, best_load = load;
    }
    if (best < 0) return;
    const int i = pool.first + best;
    touch(i);
    instances_[i]->state = Instance::State::Draining;
    log(RequestEvent::Kind::ReplicaDrain, now, -1, i);
    if (!instances_[i]->busy && !instances_[i]->engine->has_unfinished()) turn_off(i, now);
    --n;
  }
}

void Fleet::turn_off(int i, double now) {
  Instance& inst = *instances_[i];
  touch(i);
  inst.state = Instance::State::Off;
  log(RequestEvent::Kind::ReplicaOff, now, -1, i);
  inst.engine->clear_prefix_cache();  // a replica started later comes up cold
}

}  // namespace testbed
