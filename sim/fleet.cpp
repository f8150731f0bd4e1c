#include "sim/fleet.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/block_hash.h"
#include "engine/common/config_error.h"
#include "engine/common/load_ahead.h"
#include "engine/common/option_table.h"
#include "engine/semantic_cache.h"
#include "sim/fleet_state.h"
#include "sim/instance_set.h"

namespace testbed {

void FleetConfig::bind(OptionTable& t) {
  t.add("fleet.num_instances", &num_instances, "serving instances behind the router (simulated mode)");
  t.add("fleet.sample_interval_s", &sample_interval_s, "seconds between KV-usage samples per instance (0: none)");
  t.add("fleet.threads", &threads,
        "threads stepping instances between routing decisions (results identical for any number; unified pools only)");
  t.add("fleet.router_refresh_s", &router_refresh_s,
        "seconds between refreshes of the routers' view of the instances (loads, KV events), as a metrics poll; 0: live");
}

void FleetConfig::validate() const {
  require(num_instances >= 1 && num_instances <= kMaxInstances, "fleet.num_instances",
          "must be in [1, " + std::to_string(kMaxInstances) + "]");
  // Shorter than a step samples the same state over and over, and fills memory on long runs.
  require(sample_interval_s == 0 || sample_interval_s >= 1e-3, "fleet.sample_interval_s",
          "must be 0 (no samples) or at least 0.001 s");
  require(threads >= 1 && threads <= kMaxThreads, "fleet.threads", "must be in [1, " + std::to_string(kMaxThreads) + "]");
  // Shorter than a microsecond is a refresh per event at best, and many empty ones between them.
  require(router_refresh_s == 0 || (std::isfinite(router_refresh_s) && router_refresh_s >= 1e-6), "fleet.router_refresh_s",
          "must be 0 (a live view) or at least 0.000001 s");
}


const Router& Fleet::router(int pool) const {
  if (pool < 0 || pool >= static_cast<int>(pools_.size()))
    throw std::out_of_range("Fleet::router: no pool " + std::to_string(pool));
  if (!pools_[pool]->spec.router) throw std::logic_error("Fleet::router: pool " + std::to_string(pool) + " has no router");
  return *pools_[pool]->spec.router;
}

void Fleet::forward_kv_event(Router& router, int local, const KvEvent& e) {
  const double delay = options_.faults.kv_event_delay_s;
  if (delay <= 0) {
    router.on_kv_event(local, e);
    return;
  }
  // In order: every event of an instance is delayed alike, and the loop keeps insertion order at equal times.
  loop_.at(loop_.now() + delay, kRankTransfer, [&router, local, e](double) { router.on_kv_event(local, e); });
}

Fleet::Fleet(std::vector<FleetPool> pools, FleetOptions options) : options_(options) {
  if (pools.empty()) throw std::logic_error("Fleet: no pool");
  int num_senders = 0;
  for (FleetPool& spec : pools) {
    auto pool = std::make_unique<Pool>();
    pool->first = static_cast<int>(instances_.size());
    pool->spec = std::move(spec);
    if (pool->spec.engines.empty()) throw std::logic_error("Fleet: pool " + pool->spec.name + " has no instance");
    const int p = static_cast<int>(pools_.size());
    for (size_t k = 0; k < pool->spec.engines.size(); ++k) {
      Engine* e = pool->spec.engines[k];
      if (e->instance() != static_cast<int>(instances_.size()))
        throw std::logic_error("Fleet: engine ids must run through the pools in order");
      instances_.push_back(std::make_unique<Instance>());
      instances_.back()->engine = e;
      engine_of_.push_back(e);
      instances_.back()->pool = p;
      instances_.back()->local = static_cast<int>(k);
      if (pool->spec.router->wants_kv_events()) {
        forwarders_.push_back(std::make_unique<EventForwarder>(*this, *pool->spec.router, static_cast<int>(k)));
        e->add_kv_listener(forwarders_.back().get());
        instances_.back()->forwarder = forwarders_.back().get();
      }
    }
    if (pool->spec.takes_arrivals) {
      if (ingress_ && !options_.model_routing.enabled()) throw std::logic_error("Fleet: more than one pool takes arrivals");
      if (!ingress_) ingress_ = pool.get();
    }
    if (pool->spec.receives_handoffs) {
      if (decode_) throw std::logic_error("Fleet: more than one pool receives hand-offs");
      decode_ = pool.get();
    }
    if (pool->spec.hands_off) ++num_senders;
    pools_.push_back(std::move(pool));
  }
  if (!ingress_) throw std::logic_error("Fleet: no pool takes arrivals");
  if ((num_senders > 0) != (decode_ != nullptr))
    throw std::logic_error("Fleet: pools that hand off need exactly one pool that receives, and the other way round");
  routed_.assign(instances_.size(), 0);
  if (options_.model_routing.enabled()) {
    class_router_ = std::make_unique<ClassRouter>(options_.model_routing);
    for (const std::string& name : options_.model_routing.pools()) {
      auto it = std::find_if(pools_.begin(), pools_.end(), [&](const auto& p) { return p->spec.name == name; });
      if (it == pools_.end() || !(*it)->spec.takes_arrivals || (*it)->spec.hands_off)
        throw ConfigError("ingress.class_pools: no unified pool named '" + name + "'");
      class_pools_.push_back(it->get());
    }
  }
  for (size_t p = 0; p < pools_.size(); ++p) {
    Pool& pool = *pools_[p];
    const AutoscaleConfig& a = pool.spec.autoscale;
    if (!a.enabled()) continue;
    const int size = static_cast<int>(pool.spec.engines.size());
    with_key_prefix(pool.spec.name == "main" ? "" : "pool." + pool.spec.name + ".", [&] { a.validate(size); });
    if (pool.spec.hands_off || pool.spec.receives_handoffs)
      throw ConfigError("pool." + pool.spec.name + ".autoscale.policy: autoscaling is modelled for unified pools only");
    pool.policy = a.policy.create(AutoscalePolicySetup{});
    for (int k = a.initial_for(size); k < size; ++k) instances_[pool.first + k]->state = Instance::State::Off;
  }
  const int n = static_cast<int>(instances_.size());
  for (auto& pool : pools_) pool->loads.resize(pool->spec.engines.size());
  is_touched_.assign(n, 0);
  for (int i = 0; i < n; ++i) touch(i);  // every load is read before the first decision
  options_.faults.validate(n);
  if (options_.threads > 1) {
    // What a step may do beyond its instance, a worker cannot (sim/fleet_windows.cpp).
    for (const auto& pool : pools_) {
      require(!pool->spec.hands_off && !pool->spec.receives_handoffs, "fleet.threads",
              "pool " + pool->spec.name + " hands KV over: more than one thread steps unified pools only");
      require(!pool->policy, "fleet.threads",
              "pool " + pool->spec.name + " autoscales: more than one thread steps fixed pools only");
    }
    require(!options_.semantic_cache.enabled, "fleet.threads",
            "the ingress cache learns from finishing requests: more than one thread needs it off");
    kv_apply_stepped_ = options_.faults.kv_event_delay_s <= 0 &&
                        std::all_of(pools_.begin(), pools_.end(), [](const auto& pool) {
                          return !pool->spec.router->wants_kv_events() || pool->spec.router->kv_events_commute();
                        });
    for (auto& inst : instances_)
      if (MetricsSink* sink = inst->engine->sink()) {
        inst->deferred = sink->make_deferred();
        if (!inst->deferred) throw std::logic_error("Fleet: an engine's sink cannot defer its reports (fleet.threads > 1)");
      }
  }
  if (options_.router_refresh_s > 0) {
    // Routing ahead needs a view nothing but a refresh changes: what a router
    // reads (each instance's availability too) stays as it was read.
    const char* key = "fleet.router_refresh_s";
    for (const auto& pool : pools_) {
      require(!pool->spec.hands_off && !pool->spec.receives_handoffs, key,
              "pool " + pool->spec.name + " hands KV over: a refreshed view is modelled for unified pools only");
      require(!pool->policy, key, "pool " + pool->spec.name + " autoscales: a refreshed view needs fixed pools");
    }
    require(options_.faults.failures().empty(), key,
            "instances fail (fault.fail): a refreshed view is modelled without failures");
    require(options_.faults.kv_event_delay_s == 0, key,
            "fault.kv_event_delay_s also makes the routers' view stale: set one of the two");
    require(!options_.semantic_cache.enabled, key, "the ingress cache sits before the routers: a refreshed view needs it off");
  }
  for (const FaultConfig::Slowdown& s : options_.faults.slowdowns()) instances_[s.instance]->slow.push_back(s);
  for (const FaultConfig::Failure& f : options_.faults.failures()) {
    const Pool& pool = *pools_[instances_[f.instance]->pool];
    require(!pool.spec.hands_off && !pool.spec.receives_handoffs, "fault.fail",
            "instance " + std::to_string(f.instance) + " is in pool " + pool.spec.name +
                ", which hands KV over: failures are modelled for unified pools only");
  }
}

namespace {
std::vector<FleetPool> one_pool(std::vector<Engine*> engines, std::unique_ptr<Router> router) {
  std::vector<FleetPool> pools(1);
  pools[0].engines = std::move(engines);
  pools[0].router = std::move(router);
  return pools;
}
}  // namespace

Fleet::Fleet(std::vector<Engine*> engines, std::unique_ptr<Router> router, double sample_interval_s, MetricsSink* sink)
    : Fleet(one_pool(std::move(engines), std::move(router)), [&] {
        FleetOptions o;
        o.sample_interval_s = sample_interval_s;
        o.sink = sink;
        return o;
      }()) {}

Fleet::~Fleet() = default;

SimulationStats Fleet::run(RequestSource& source, const ProgressFn& progress) {
  source_ = &source;
  progress_ = &progress;
  total_ = source.size_hint();
  if (options_.router_refresh_s > 0)
    refresh(0.0);  // the first view, and the requests until the next refresh
  else
    pull_next_arrival();
  for (const FaultConfig::Failure& f : options_.faults.failures())
    loop_.at(f.t, kRankTransfer, [this, i = f.instance](double t) { fail(i, t); });
  if (options_.sample_interval_s > 0) loop_.at(0.0, kRankControl, [this](double t) { sample(t); });
  for (size_t p = 0; p < pools_.size(); ++p)
    if (pools_[p]->policy) {
      const int k = static_cast<int>(p);
      const int size = static_cast<int>(pools_[p]->spec.engines.size());
      report_scale(k, 0.0, pools_[p]->spec.autoscale.initial_for(size), 0.0, AutoscaleSignals{});  // the start
      loop_.at(pools_[p]->spec.autoscale.interval_s, kRankControl, [this, k](double t) { evaluate(k, t); });
    }
  if (instances_.size() > 1)
    loop_.set_lookahead(&Fleet::lookahead, this);
  else if (instances_.size() == 1)
    instances_[0]->engine->scheduler().set_load_ahead(false);  // one instance stays in the cache
  if (options_.threads > 1)
    run_windows();
  else
    loop_.run();
  if (decode_ && !decode_->waiting.empty()) {
    const PendingHandOff& p = decode_->waiting.front();
    throw ConfigError("pool." + decode_->spec.name + ": " + std::to_string(decode_->waiting.size()) +
                      " hand-offs never found room (sequence " + std::to_string(p.h.kv.seq_id) + " needs " +
                      std::to_string(p.h.kv.blocks.size()) + " blocks; an instance has " +
                      std::to_string(decode_->spec.engines.front()->kv_cache().num_blocks()) +
                      "): give the decode pool more KV blocks or fewer sequences");
  }
  for (const auto& inst : instances_)
    if (!inst->failed && inst->engine->has_unfinished())
      throw ConfigError("scheduler: instance " + std::to_string(inst->engine->instance()) +
                        " ended with requests it could never run (configuration deadlock)");
  if (added_ != finished_ + cancelled_ + lost_ + rejected_)
    throw std::logic_error("fleet: request conservation broken: " + std::to_string(added_) + " arrived, " +
                           std::to_string(finished_) + " finished, " + std::to_string(cancelled_) + " cancelled, " +
                           std::to_string(lost_) + " lost, " + std::to_string(rejected_) + " rejected");
  SimulationStats stats;
  stats.simulated_s = loop_.now();
  stats.num_events = loop_.num_processed();
  stats.num_finished = finished_;
  stats.num_cancelled = cancelled_ + lost_;
  stats.num_lost = lost_;
  stats.num_rejected = rejected_;
  stats.num_restarts = restarts_;
  stats.num_handoffs = handoffs_;
  return stats;
}

void Fleet::log(RequestEvent::Kind kind, double t, int64_t request, int instance, int64_t bytes) {
  if (!options_.log_events || !options_.sink) return;
  RequestEvent e;
  e.kind = kind;
  e.t = t;
  e.request = request;
  e.instance = instance;
  e.bytes = bytes;
  options_.sink->on_request_event(e);
}

std::optional<Request> Fleet::read_request() {
  std::optional<Request> r = source_->next();
  if (!r) {
    source_done_ = true;
    return r;
  }
  if (r->arrival_s < last_arrival_)
    throw ConfigError("trace: request " + std::to_string(r->id) + " arrives before the previous one");
  last_arrival_ = r->arrival_s;
  return r;
}

void Fleet::pull_next_arrival() {
  std::optional<Request> r = read_request();
  if (!r) return;
  auto shared = std::make_shared<Request>(std::move(*r));
  pending_arrival_ = shared.get();
  loop_.at(shared->arrival_s, kRankArrival, [this, shared](double now) {
    pending_arrival_ = nullptr;
    arrive(std::move(*shared), now);
    pull_next_arrival();
  });
}

namespace {
template <class T>
void load_front(const std::vector<T>& v, size_t max_bytes) {
  load_lines(v.data(), std::min(v.size() * sizeof(T), max_bytes));
}
}  // namespace

void Fleet::load_records(int i) const {
  load_lines(instances_[i].get(), sizeof(Instance));
  load_lines(engine_of_[i], sizeof(Engine));
}

void Fleet::load_buffers(int i) const {
  const Instance& inst = *instances_[i];
  load_front(inst.plan.batch.items, 512);
  load_front(inst.result.token_offsets, 128);
  load_front(inst.result.tokens, 128);
  load_front(inst.outcome.seqs, 512);
  inst.engine->load_state();
}

void Fleet::lookahead(void* fleet, int next_owner, int after_owner) {
  const Fleet& f = *static_cast<const Fleet*>(fleet);
  if (after_owner >= 0) f.load_records(after_owner);
  if (next_owner >= 0) f.load_buffers(next_owner);
}

InstanceLoad Fleet::read_load(int i) const {
  const Instance& inst = *instances_[i];
  const Engine& e = *inst.engine;
  InstanceLoad l;
  l.num_waiting = e.scheduler().num_waiting();
  l.num_running = e.scheduler().num_running() + e.num_importing();
  l.kv_usage = e.kv_cache().usage();
  l.available = !inst.failed && inst.state == Instance::State::Active;
  return l;
}

const std::vector<InstanceLoad>& Fleet::loads(Pool& pool) {
  if (options_.router_refresh_s > 0) return pool.loads;  // as the last refresh read them (and what was sent since)
  for (int i : touched_) {
    const Instance& inst = *instances_[i];
    pools_[inst.pool]->loads[inst.local] = read_load(i);
    is_touched_[i] = 0;
  }
  touched_.clear();
#ifndef NDEBUG
  for (size_t k = 0; k < pool.loads.size(); ++k) {
    const InstanceLoad fresh = read_load(pool.first + static_cast<int>(k));
    const InstanceLoad& kept = pool.loads[k];
    if (fresh.num_waiting != kept.num_waiting || fresh.num_running != kept.num_running ||
        fresh.kv_usage != kept.kv_usage || fresh.available != kept.available)
      throw std::logic_error("Fleet::loads: instance " + std::to_string(pool.first + static_cast<int>(k)) +
                             " changed without touch()");
  }
#endif
  return pool.loads;
}

void Fleet::arrive(Request request, double now, bool restart) {
  if (!restart) {
    log(RequestEvent::Kind::Arrival, now, request.id, -1);
    ++added_;
  }
  if (options_.semantic_cache.enabled && !restart) {
    if (!cache_) cache_ = std::make_unique<SemanticCache>(options_.semantic_cache, static_cast<int>(request.embedding.size()));
    SemanticCache::Lookup hit;
    try {
      hit = cache_->lookup(request.prompt, request.embedding, now);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("workload: request " + std::to_string(request.id) + ": " + e.what());
    }
    const double lookup_s = options_.semantic_cache.lookup_s;
    auto shared = std::make_shared<Request>(std::move(request));
    if (hit.is_hit()) {
      // Answered by the ingress after the lookup; no engine sees it.
      const bool semantic = hit.kind == SemanticCache::Lookup::Kind::Semantic;
      const bool correct = shared->intent < 0 || hit.intent == shared->intent;
      loop_.at(now + lookup_s, kRankTransfer, [this, shared, semantic, correct](double t) {
        if (options_.sink) options_.sink->on_cache_answer(*shared, t, semantic, correct);
        log(RequestEvent::Kind::CacheAnswer, t, shared->id, -1);
        ++finished_;
      });
      return;
    }
    // A miss reaches the router after the lookup: a front-end delay like frontend.request_s.
    shared->arrival_s += lookup_s;
    shared->frontend_s += lookup_s;
    loop_.at(now + lookup_s, kRankArrival, [this, shared](double t) { place(std::move(*shared), t); });
    return;
  }
  place(std::move(request), now);
}

void Fleet::place(Request request, double now) {
  const int target = choose_instance(request, now);
  if (target < 0) {  // nothing can take it
    lose(std::move(request), now);
    return;
  }
  log(RequestEvent::Kind::Route, now, request.id, target);
  ++routed_[target];
  const int64_t id = request.id;
  touch(target);
  if (!instances_[target]->engine->add_request(std::move(request), now)) {  // can never run (trace.on_invalid = reject)
    log(RequestEvent::Kind::Cancel, now, id, target);
    ++rejected_;
    return;
  }
  kick(target, now);
}

int Fleet::choose_instance(Request& request, double now) {
  Pool* chosen = ingress_;
  if (class_router_) {
    const int c = request.request_class;
    if (c < 0 || c >= class_router_->num_classes())
      throw ConfigError("ingress.model_router: request " + std::to_string(request.id) + " has class " +
                        std::to_string(c) + "; the router knows classes 0.." +
                        std::to_string(class_router_->num_classes() - 1) +
                        " (workload.kind = semantic gives them: workload.class_weights)");
    const int routed = class_router_->predict(request.id, c);
    request.routed_class = routed;
    request.quality_failure = class_router_->quality_failure(request.id, c, routed);
    chosen = class_pools_[routed];
  }
  Pool& pool = *chosen;
  int local = 0;
  const std::vector<InstanceLoad>& load = loads(pool);
  if (pool.spec.engines.size() > 1) {
    const int block_size = pool.spec.engines[0]->kv_cache().block_size();
    if (pool.spec.router->needs_block_hashes()) hash_prompt(request, block_size);
    local = pool.spec.router->route(RoutingContext{request, request.prompt_block_hashes, load});
  }
  // A router's choice that takes no request is overruled (InstanceLoad::available).
  if (local < 0 || local >= static_cast<int>(load.size()) || !load[local].available)
    local = least_loaded_instance(load, local < 0 ? 0 : local);
  if (local < 0) return -1;
  if (pool.policy) pool.arrivals.push_back(now);
  return pool.first + local;
}

void Fleet::refresh(double /*now: refresh_k_ * router_refresh_s*/) {
  // The view: every load that changed since the last refresh is read again.
  for (int i : touched_) {
    const Instance& inst = *instances_[i];
    pools_[inst.pool]->loads[inst.local] = read_load(i);
    is_touched_[i] = 0;
  }
  touched_.clear();
  const double interval = options_.router_refresh_s;
  route_ahead(static_cast<double>(refresh_k_ + 1) * interval);
  if (!next_request_) return;  // every request is routed: the view is read no more
  // The next refresh that routes anything is the last before the next
  // arrival; the ones between would be read by no decision.
  const double next = next_request_->arrival_s;
  int64_t k = std::max<int64_t>(refresh_k_ + 1, static_cast<int64_t>(std::ceil(next / interval)) - 1);
  while (static_cast<double>(k + 1) * interval < next) ++k;
  while (k > refresh_k_ + 1 && static_cast<double>(k) * interval >= next) --k;
  refresh_k_ = k;
  loop_.at(static_cast<double>(k) * interval, kRankControl, [this](double t) { refresh(t); });
}

void Fleet::route_ahead(double until) {
  while (true) {
    if (!next_request_) {
      if (source_done_) return;
      next_request_ = read_request();
      if (!next_request_) return;
    }
    const double t = next_request_->arrival_s;
    if (t > until) return;
    Request request = std::move(*next_request_);
    next_request_.reset();
    const int target = choose_instance(request, t);
    if (target < 0) throw std::logic_error("Fleet: no instance takes requests in a fixed fleet without failures");
    Instance& inst = *instances_[target];
    ++pools_[inst.pool]->loads[inst.local].num_waiting;  // the router counts what it sent
    inst.landings.push_back(std::move(request));
    loop_.at_owned(t, kRankArrival, target, 0, [this, target](double at) { land(target, at); });
  }
}

void Fleet::land(int i, double now) {
  Instance& inst = *instances_[i];
  Request request = std::move(inst.landings.front());
  inst.landings.pop_front();
  log(RequestEvent::Kind::Arrival, now, request.id, -1);
  ++added_;
  log(RequestEvent::Kind::Route, now, request.id, i);
  ++routed_[i];
  const int64_t id = request.id;
  touch(i);
  if (!inst.engine->add_request(std::move(request), now)) {  // can never run (trace.on_invalid = reject)
    log(RequestEvent::Kind::Cancel, now, id, i);
    ++rejected_;
    return;
  }
  kick(i, now);
}


void Fleet::fail(int i, double now) {
  Instance& inst = *instances_[i];
  if (inst.failed) return;
  touch(i);
  inst.failed = true;
  ++inst.generation;  // the step in flight never ends
  inst.busy = false;
  log(RequestEvent::Kind::Fail, now, -1, i);
  // In id order, so the new routing is the same whatever the queues' order was.
  std::vector<std::unique_ptr<Sequence>> seqs = inst.engine->fail();
  std::sort(seqs.begin(), seqs.end(), [](const auto& a, const auto& b) { return a->id() < b->id(); });
  for (auto& seq : seqs) {
    if (options_.faults.lose()) {
      if (options_.sink) options_.sink->on_cancel(i, *seq, now, CancelReason::Lost);
      log(RequestEvent::Kind::Cancel, now, seq->id(), i);
      ++lost_;
    } else {
      ++restarts_;
      arrive(restart_request(*seq), now, /*restart=*/true);
    }
  }
}

void Fleet::lose(Request request, double now) {
  Sequence seq(std::move(request));
  if (options_.sink) {
    if (seq.request().restarts == 0) options_.sink->on_arrival(-1, seq, now);
    options_.sink->on_cancel(-1, seq, now, CancelReason::Lost);
  }
  log(RequestEvent::Kind::Cancel, now, seq.id(), -1);
  ++lost_;
}

void Fleet::kick(int i, double now) {
  Instance& inst = *instances_[i];
  if (inst.busy || inst.start_pending || inst.failed || inst.state == Instance::State::Off ||
      inst.state == Instance::State::Starting)
    return;
  inst.start_pending = true;
  loop_.at_owned(now, kRankStepStart, i, 0, [this, i](double t) { start_kicked(i, t); });
}

void Fleet::start_kicked(int i, double now) {
  instances_[i]->start_pending = false;
  // It may have started a step since the kick (an instance whose step ended at this time goes on at once).
  if (!instances_[i]->busy) start_step(i, now);
}

bool Fleet::plan_step(int i, double now) {
  Instance& inst = *instances_[i];
  Engine& engine = *inst.engine;
  engine.begin_step(now, inst.plan);
  if (inst.plan.empty()) {
    // An instance whose blocks wait on transfers (exports leaving, imports
    // arriving) resumes when one lands; anything else is a deadlock.
    if (engine.has_unfinished() && engine.kv_cache().num_exports() == 0 && engine.num_importing() == 0)
      throw ConfigError("scheduler: instance " + std::to_string(i) +
                        " could schedule nothing although requests wait (configuration deadlock)");
    return false;
  }
  inst.busy = true;
  engine.executor().execute(inst.plan.batch, inst.result);
  for (const FaultConfig::Slowdown& s : inst.slow)
    if (now >= s.t0 && now < s.t1) inst.result.duration_s *= s.factor;
  return true;
}

void Fleet::start_step(int i, double now) {
  touch(i);
  Instance& inst = *instances_[i];
  const bool started = plan_step(i, now);
  // Clients that left by now (engine/scheduler.h): their blocks are free already.
  for (const auto& seq : inst.engine->scheduler().cancelled()) {
    log(RequestEvent::Kind::Cancel, now, seq->id(), i);
    ++cancelled_;
  }
  if (!started) return;
  loop_.at_owned(now + inst.result.duration_s, kRankStepEnd, i, inst.generation,
                 [this, i, gen = inst.generation](double end) {
                   if (instances_[i]->generation == gen) end_step(i, end);
                 });
}

void Fleet::end_step(int i, double end) {
  touch(i);
  Instance& inst = *instances_[i];
  StepOutcome& out = inst.outcome;
  inst.engine->end_step(inst.plan, inst.result, end, out);
  inst.busy = false;
  inst.busy_s += end - out.start_s;
  Pool& own = *pools_[inst.pool];
  if (own.policy)
    for (const SeqOutcome& o : out.seqs)
      if (o.first_token) own.ttfts.emplace_back(o.seq->first_token_s, o.seq->first_token_s - o.seq->client_arrival_s());
  if (options_.log_events)
    for (const SeqOutcome& o : out.seqs) {
      if (o.first_token) log(RequestEvent::Kind::FirstToken, end, o.seq->id(), i);
      if (o.finished) log(RequestEvent::Kind::Finish, end, o.seq->id(), i);
      if (o.cancelled) log(RequestEvent::Kind::Cancel, end, o.seq->id(), i);
    }
  finished_ += out.num_finished;
  cancelled_ += out.num_cancelled;
  if (cache_)  // the answer exists now: later askers of this question may get it
    for (const SeqOutcome& o : out.seqs)
      if (o.finished) {
        const Sequence& seq = *o.seq;
        prompt_buffer_.assign(seq.tokens().begin(), seq.tokens().begin() + seq.num_prompt_tokens());
        cache_->insert(prompt_buffer_, seq.request().embedding, seq.request().intent, end);
      }
  if (!out.handed_off.empty()) {
    if (!pools_[inst.pool]->spec.hands_off)
      throw std::logic_error("fleet: instance " + std::to_string(i) + " handed a sequence off outside a prefill pool");
    for (HandOff& h : out.handed_off) hand_off(i, std::move(h), end, end - out.start_s);
    out.handed_off.clear();
  }
  if (*progress_) (*progress_)(finished_ + cancelled_, total_ >= 0 ? total_ : added_);
  if (inst.engine->has_unfinished())
    start_step(i, end);
  else if (inst.state == Instance::State::Draining)
    turn_off(i, end);  // drained: it holds nothing any more
  // A decode step may have freed blocks that a waiting hand-off needs.
  if (decode_ && pools_[inst.pool].get() == decode_ && !decode_->waiting.empty())
    dispatch_handoffs(*decode_, end);
}

void Fleet::hand_off(int from, HandOff h, double now, double overlap_s) {
  Sequence& seq = *h.seq;
  seq.handoff.prefill_instance = from;
  seq.handoff.ready_s = now;
  ++handoffs_;
  log(RequestEvent::Kind::PrefillDone, now, seq.id(), from);
  decode_->waiting.push_back(PendingHandOff{from, overlap_s, std::move(h)});
  if (decode_->waiting.size() == 1) dispatch_handoffs(*decode_, now);
}

void Fleet::dispatch_handoffs(Pool& pool, double now) {
  const int n = static_cast<int>(pool.spec.engines.size());
  // Hand-offs whose clients left while they waited for room: their KV is released at the source.
  for (auto it = pool.waiting.begin(); it != pool.waiting.end();) {
    Sequence& seq = *it->h.seq;
    if (seq.cancel_deadline_s() > now) {
      ++it;
      continue;
    }
    seq.status = SeqStatus::Cancelled;
    seq.finish_s = now;
    if (options_.sink) options_.sink->on_cancel(it->from, seq, now, CancelReason::Deadline);
    log(RequestEvent::Kind::Cancel, now, seq.id(), it->from);
    ++cancelled_;
    touch(it->from);
    instances_[it->from]->engine->release_export(seq.id());
    kick(it->from, now);
    it = pool.waiting.erase(it);
  }
  while (!pool.waiting.empty()) {
    PendingHandOff& p = pool.waiting.front();
    Sequence& seq = *p.h.seq;
    int choice = 0;
    if (n > 1) {
      const int block_size = pool.spec.engines[0]->kv_cache().block_size();
      static const std::vector<uint64_t> kNoHashes;
      const std::vector<uint64_t>& hashes = pool.spec.router->needs_block_hashes() ? seq.block_hashes(block_size) : kNoHashes;
      choice = pool.spec.router->route(RoutingContext{seq.request(), hashes, loads(pool)});
    }
    // The router's choice first; when it has no room, the next instances in turn.
    bool placed = false;
    for (int k = 0; k < n && !placed; ++k) placed = try_import(pool, (choice + k) % n, p, now);
    if (!placed) return;  // back-pressure: wait, in order, for a decode step to free room
    pool.waiting.pop_front();
  }
}

bool Fleet::try_import(Pool& pool, int local, PendingHandOff& p, double now) {
  const int to = pool.first + local;
  touch(to);
  Engine& receiver = *instances_[to]->engine;
  const int64_t id = p.h.kv.seq_id;
  const int num_tokens = p.h.kv.num_tokens, block_size = p.h.kv.block_size;
  Sequence* seq = p.h.seq.get();
  KvImport& plan = import_plan_;  // reused: its vectors keep their capacity
  if (!receiver.begin_import(p.h, plan)) return false;
  // Only the blocks the receiver's prefix cache lacks move.
  const int tokens_moved = std::max(0, num_tokens - plan.num_reused_blocks * block_size);
  const double bytes = tokens_moved * pool.spec.kv_bytes_per_token;
  const Pool& source_pool = *pools_[instances_[p.from]->pool];
  const KvTransferCost cost = kv_transfer_cost(pool.spec.link, bytes, source_pool.spec.tensor_parallel,
                                               pool.spec.tensor_parallel, pool.spec.num_layers, p.overlap_s);
  seq->handoff.transfer_start_s = now;
  seq->handoff.transfer_end_s = now + cost.seconds;
  seq->handoff.transfer_bytes = static_cast<int64_t>(bytes);
  seq->handoff.transfer_blocks = static_cast<int>(plan.source_blocks.size());
  seq->handoff.reused_blocks = plan.num_reused_blocks;
  ++routed_[to];
  log(RequestEvent::Kind::DecodeRoute, now, id, to);
  log(RequestEvent::Kind::TransferStart, now, id, to, static_cast<int64_t>(bytes));
  const int from = p.from;
  loop_.at(now + cost.seconds, kRankTransfer, [this, from, to, id](double t) { transfer_done(from, to, id, t); });
  return true;
}

void Fleet::transfer_done(int from, int to, int64_t seq_id, double now) {
  log(RequestEvent::Kind::TransferDone, now, seq_id, to);  // the KV has landed; both copies still held
  touch(to);
  touch(from);
  instances_[to]->engine->end_import(seq_id, now);
  instances_[from]->engine->release_export(seq_id);
  kick(to, now);
  kick(from, now);  // its freed blocks may admit a waiting prompt
}


void Fleet::sample(double now) {
  bool any_work = false;
  for (size_t i = 0; i < instances_.size(); ++i) {
    const Engine& e = *instances_[i]->engine;
    InstanceSample s{now, static_cast<int>(i), e.kv_cache().usage(), e.scheduler().num_waiting(),
                     e.scheduler().num_running()};
    if (options_.sink) options_.sink->on_sample(s);
    any_work |= e.has_unfinished();
  }
  // Keep sampling while anything is left to happen.
  if (any_work || !loop_.empty())
    loop_.at(now + options_.sample_interval_s, kRankControl, [this](double t) { sample(t); });
}

}  // namespace testbed
