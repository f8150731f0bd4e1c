#include "sim/fleet.h"

#include <stdexcept>

#include "engine/block_hash.h"
#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "sim/instance_set.h"

namespace testbed {

void FleetConfig::bind(OptionTable& t) {
  t.add("fleet.num_instances", &num_instances, "serving instances behind the router (simulated mode)");
  t.add("fleet.sample_interval_s", &sample_interval_s, "seconds between KV-usage samples per instance (0: none)");
}

void FleetConfig::validate() const {
  require(num_instances >= 1 && num_instances <= kMaxInstances, "fleet.num_instances",
          "must be in [1, " + std::to_string(kMaxInstances) + "]");
  require(sample_interval_s >= 0, "fleet.sample_interval_s", "must be >= 0");
}

struct Fleet::Instance {
  Engine* engine = nullptr;
  bool busy = false;
  bool start_pending = false;
  // The step in flight (an instance runs one at a time): kept here, not in the
  // event, so the completion event captures only (this, i).
  StepPlan plan;
  StepResult result;
  StepOutcome outcome;  // reused step after step
};

// Hands one instance's KV events to the router, tagged with the instance.
class Fleet::EventForwarder : public KvEventListener {
 public:
  EventForwarder(Router& router, int instance) : router_(router), instance_(instance) {}
  void on_kv_event(const KvEvent& e) override { router_.on_kv_event(instance_, e); }

 private:
  Router& router_;
  int instance_;
};

Fleet::Fleet(std::vector<Engine*> engines, std::unique_ptr<Router> router, double sample_interval_s, MetricsSink* sink)
    : router_(std::move(router)), sample_interval_s_(sample_interval_s), sink_(sink), routed_(engines.size(), 0) {
  for (size_t i = 0; i < engines.size(); ++i) {
    instances_.push_back(std::make_unique<Instance>());
    instances_.back()->engine = engines[i];
    if (router_->wants_kv_events()) {
      forwarders_.push_back(std::make_unique<EventForwarder>(*router_, static_cast<int>(i)));
      engines[i]->add_kv_listener(forwarders_.back().get());
    }
  }
}

Fleet::~Fleet() = default;

SimulationStats Fleet::run(RequestSource& source, const ProgressFn& progress) {
  source_ = &source;
  progress_ = &progress;
  total_ = source.size_hint();
  pull_next_arrival();
  if (sample_interval_s_ > 0) loop_.at(0.0, kRankControl, [this](double t) { sample(t); });
  loop_.run();
  SimulationStats stats;
  stats.simulated_s = loop_.now();
  stats.num_events = loop_.num_processed();
  stats.num_finished = finished_;
  return stats;
}

void Fleet::pull_next_arrival() {
  std::optional<Request> r = source_->next();
  if (!r) return;
  if (r->arrival_s < last_arrival_)
    throw ConfigError("trace: request " + std::to_string(r->id) + " arrives before the previous one");
  last_arrival_ = r->arrival_s;
  auto shared = std::make_shared<Request>(std::move(*r));
  loop_.at(shared->arrival_s, kRankArrival, [this, shared](double now) {
    arrive(std::move(*shared), now);
    pull_next_arrival();
  });
}

std::vector<InstanceLoad> Fleet::loads() const {
  std::vector<InstanceLoad> out(instances_.size());
  for (size_t i = 0; i < instances_.size(); ++i) {
    const Engine& e = *instances_[i]->engine;
    out[i].num_waiting = e.scheduler().num_waiting();
    out[i].num_running = e.scheduler().num_running();
    out[i].kv_usage = e.kv_cache().usage();
  }
  return out;
}

void Fleet::arrive(Request request, double now) {
  int target = 0;
  if (instances_.size() > 1) {
    const int block_size = instances_[0]->engine->kv_cache().block_size();
    if (router_->needs_block_hashes() && request.prompt_hash_block_size != block_size) {
      // Hashed once here; the engine's sequence adopts them.
      request.prompt_block_hashes.clear();
      extend_block_hashes(request.prompt_block_hashes, request.prompt, block_size, request.cache_salt);
      request.prompt_hash_block_size = block_size;
    }
    loads_ = loads();
    target = router_->route(RoutingContext{request, request.prompt_block_hashes, loads_});
  }
  ++routed_[target];
  ++added_;
  instances_[target]->engine->add_request(std::move(request), now);
  kick(target, now);
}

void Fleet::kick(int i, double now) {
  Instance& inst = *instances_[i];
  if (inst.busy || inst.start_pending) return;
  inst.start_pending = true;
  loop_.at(now, kRankStepStart, [this, i](double t) {
    instances_[i]->start_pending = false;
    start_step(i, t);
  });
}

void Fleet::start_step(int i, double now) {
  Instance& inst = *instances_[i];
  Engine& engine = *inst.engine;
  engine.begin_step(now, inst.plan);
  if (inst.plan.empty()) {
    if (engine.has_unfinished())
      throw ConfigError("scheduler: instance " + std::to_string(i) +
                        " could schedule nothing although requests wait (configuration deadlock)");
    return;
  }
  inst.busy = true;
  engine.executor().execute(inst.plan.batch, inst.result);
  loop_.at(now + inst.result.duration_s, kRankStepEnd, [this, i](double end) { end_step(i, end); });
}

void Fleet::end_step(int i, double end) {
  Instance& inst = *instances_[i];
  StepOutcome& out = inst.outcome;
  inst.engine->end_step(inst.plan, inst.result, end, out);
  inst.busy = false;
  if (!out.handed_off.empty())
    throw std::logic_error("fleet: instance " + std::to_string(i) + " handed a sequence off, but no pool receives it");
  finished_ += out.num_finished;
  if (*progress_) (*progress_)(finished_, total_ >= 0 ? total_ : added_);
  if (inst.engine->has_unfinished()) start_step(i, end);
}

void Fleet::sample(double now) {
  bool any_work = false;
  for (size_t i = 0; i < instances_.size(); ++i) {
    const Engine& e = *instances_[i]->engine;
    InstanceSample s{now, static_cast<int>(i), e.kv_cache().usage(), e.scheduler().num_waiting(),
                     e.scheduler().num_running()};
    if (sink_) sink_->on_sample(s);
    any_work |= e.has_unfinished();
  }
  // Keep sampling while anything is left to happen.
  if (any_work || !loop_.empty()) loop_.at(now + sample_interval_s_, kRankControl, [this](double t) { sample(t); });
}

}  // namespace testbed
