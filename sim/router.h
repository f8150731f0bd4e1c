// Router: picks the instance for each arriving request, chosen by router.type
// through one registry (one file per router in sim/routers/, each with its keys). Routers see the
// request, its block hashes (the engines' own chained hashing), each
// instance's load, and, if they ask, every instance's KvEvents.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_event.h"
#include "engine/common/choice.h"
#include "engine/common/registry.h"
#include "engine/request.h"

namespace testbed {

class PrefixIndex;

struct InstanceLoad {
  int num_waiting = 0;
  int num_running = 0;
  double kv_usage = 0.0;  // used blocks / blocks
  // False for an instance that takes no new request (failed, starting, draining,
  // off: sim/faults.h, sim/autoscaler.h). A router that picks one anyway is
  // overruled by the fleet, which sends the request to the least loaded available one.
  bool available = true;
  int load() const { return num_waiting + num_running; }  // requests in the instance
};

struct RoutingContext {
  const Request& request;
  const std::vector<uint64_t>& block_hashes;  // full prompt blocks
  const std::vector<InstanceLoad>& loads;     // one per instance
};

class Router {
 public:
  virtual ~Router() = default;
  virtual int route(const RoutingContext& ctx) = 0;
  // Prefix routers need the request's block hashes; the others skip computing them.
  virtual bool needs_block_hashes() const { return false; }
  virtual bool wants_kv_events() const { return false; }
  virtual void on_kv_event(int /*instance*/, const KvEvent& /*event*/) {}
  // One step's events of one instance, in order.
  virtual void on_kv_events(int instance, const KvEvent* events, size_t n) {
    for (size_t i = 0; i < n; ++i) on_kv_event(instance, events[i]);
  }
  // True when what the router keeps of KV events depends on each instance's
  // events alone, in that instance's order, not on how different instances'
  // events interleave (a PrefixIndex: a bit per instance and block). Between
  // two routing decisions, a fleet on several threads may then hand each
  // instance's events over as soon as that instance is stepped, in whatever
  // order the instances finish; the decisions are those of one thread
  // (sim/fleet_windows.cpp). False: they come in one thread's order.
  virtual bool kv_events_commute() const { return false; }
  // Work a router may do ahead for `request`, whose decision comes next, on
  // its state as it is now: a fleet's worker calls it while the replay goes
  // on (sim/fleet_windows.cpp). route() must answer the same with or without
  // it: what is prepared is used only while nothing it rests on has changed.
  virtual void prepare(const Request& /*request*/, const std::vector<uint64_t>& /*block_hashes*/) {}
  // The router's view of which instance caches which block, if it keeps one (tests, diagnostics).
  virtual const PrefixIndex* prefix_index() const { return nullptr; }
};

// What every router is built from (its own keys come from its Params).
struct RouterSetup {
  int num_instances = 1;
  int blocks_per_instance = 0;
};

using RouterRegistry = Registry<Router, const RouterSetup&>;
// router.type and every router's keys.
using RouterChoice = Choice<RouterRegistry>;
RouterChoice router_choice(const std::string& type = "round_robin",
                           const std::vector<std::pair<std::string, std::string>>& keys = {});

std::unique_ptr<Router> make_router(const RouterChoice& choice, const RouterSetup& setup);

// The least loaded available instance (requests in it, then KV usage), ties to
// the lowest id at or after `start`, so equal instances share the work in
// turn; -1 when none is available.
int least_loaded_instance(const std::vector<InstanceLoad>& loads, int start = 0);
// The prefix routers' choice: among the instances whose `matched` blocks are
// the most, the least loaded (least_loaded_instance's order from `start`);
// only when none of them is available, the least running among the rest.
// -1 when no instance is available.
int longest_match_least_loaded(const std::vector<InstanceLoad>& loads, const std::vector<int>& matched, int start);

}  // namespace testbed
