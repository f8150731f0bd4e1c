// Router: picks the instance for each arriving request, chosen by router.type
// through one registry (one file per router in sim/routers/). Routers see the
// request, its block hashes (the engines' own chained hashing), each
// instance's load, and, if they ask, every instance's KvEvents.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_event.h"
#include "engine/registry.h"
#include "engine/request.h"

namespace testbed {

class OptionTable;

struct RouterConfig {
  std::string type = "round_robin";
  uint64_t seed = 1;
  // weighted (llm-d's defaults: prefix 3, queue 2, KV usage 2)
  double weight_prefix = 3.0;
  double weight_queue = 2.0;
  double weight_kv = 2.0;
  // prefix_approx and cache_aware: blocks remembered per instance (0: the instance's KV blocks)
  int64_t approx_capacity_blocks = 0;
  // cache_aware (SGLang's router defaults)
  double cache_threshold = 0.5;
  int balance_abs_threshold = 32;
  double balance_rel_threshold = 1.0001;
  void bind(OptionTable& table);
  void validate() const;
};

struct InstanceLoad {
  int num_waiting = 0;
  int num_running = 0;
  double kv_usage = 0.0;  // used blocks / blocks
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
};

struct RouterSetup {
  RouterConfig config;
  int num_instances = 1;
  int blocks_per_instance = 0;
};

using RouterRegistry = Registry<Router, const RouterSetup&>;

std::unique_ptr<Router> make_router(const RouterSetup& setup);

// The least loaded instance (requests in it, then KV usage), ties to the lowest
// id at or after `start`, so equal instances share the work in turn.
int least_loaded_instance(const std::vector<InstanceLoad>& loads, int start = 0);

}  // namespace testbed
