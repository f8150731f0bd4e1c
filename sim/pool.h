// Pools: a cluster is one or more pools of identical instances, each with a
// role, a size, its own engine config (scheduler.*, cache.*), hardware and
// tensor parallelism (cost_model.*), router (router.*) and, for a decode
// pool, the link its KV arrives over (link.*). In a config:
//
//   [pool.prefill]                 [pool.decode]
//   role = prefill                 role = decode
//   size = 2                       size = 6
//   cost_model.hardware = h100.ini router.type = least_loaded
//   scheduler.max_num_seqs = 8     link.layerwise = true
//
// Every key of a pool is pool.NAME.<a top-level key>, settable on the command
// line as --pool.NAME.scheduler.chunk_size=512; a key a pool does not set is
// the top-level one (so [scheduler] applies to every pool). A config without
// pool sections is one unified pool of fleet.num_instances instances: today's
// fleet, bit for bit.
//
// Roles are chosen by name through PoolRoleRegistry (sim/pool_roles.cpp):
// `unified` runs whole requests; `prefill` takes arrivals and hands each
// sequence off after its first token; `decode` receives hand-offs. A cluster
// has one pool that takes arrivals and, when a pool hands off, one pool that
// receives. (Several ingress pools need a model router in front of them: the
// ingress layer.)
#pragma once

#include <string>
#include <vector>

#include "engine/common/choice.h"
#include "engine/common/registry.h"
#include "engine/engine.h"
#include "sim/autoscaler.h"
#include "sim/cost_model.h"
#include "sim/kv_link.h"
#include "sim/router.h"

namespace testbed {

// What a pool's role means to the fleet.
class PoolRole {
 public:
  virtual ~PoolRole() = default;
  virtual bool takes_arrivals() const = 0;           // the ingress router sends requests here
  virtual bool hands_off_after_prefill() const = 0;  // a sequence leaves after its first token
  virtual bool receives_handoffs() const = 0;        // handed-off sequences are imported here
};
struct PoolRoleSetup {};
using PoolRoleRegistry = Registry<PoolRole, const PoolRoleSetup&>;

struct PoolConfig {
  std::string name;
  Choice<PoolRoleRegistry> role{"role", "unified", "what the pool does"};  // pool.NAME.role (required in a config)
  int size = 1;                  // instances (required in a config)
  EngineConfig engine;
  CostModelConfig cost_model;
  RouterChoice router = router_choice();
  KvLinkConfig link;
  AutoscaleConfig autoscale;  // pool.NAME.autoscale.* (sim/autoscaler.h)
  std::string model_config;   // pool.NAME.model.config: its own model (default: the run's model.config)

  std::string prefix() const { return "pool." + name + "."; }
  // The chosen role (throws ConfigError naming pool.NAME.role for an unknown one).
  std::unique_ptr<PoolRole> behavior() const;
  bool takes_arrivals() const { return behavior()->takes_arrivals(); }
  bool hands_off_after_prefill() const { return behavior()->hands_off_after_prefill(); }
  bool receives_handoffs() const { return behavior()->receives_handoffs(); }
  // pool.NAME.role, .size and pool.NAME.<every scheduler, cache, cost_model, router and link key>.
  void bind(OptionTable& table);
  // Throws ConfigError naming pool.NAME.<key>.
  void validate() const;
};

// The pool names that keys pool.NAME.* in `keys` mention, in first-mention order.
// Throws ConfigError for a name that is not [A-Za-z0-9_-]+.
std::vector<std::string> pool_names(const std::vector<std::string>& keys);

// The rules between pools (one pool takes arrivals; one receives when any
// hands off, and none otherwise; equal block sizes across a hand-off; at most
// kMaxInstances per pool); errors name the key. `model_routed`: a model router
// (sim/model_router.h) sends arrivals to several unified pools.
void validate_pools(const std::vector<PoolConfig>& pools, bool model_routed = false);

// Runs f(); a ConfigError it throws is rethrown with `prefix` before its key,
// so a pool's scheduler error reads "pool.decode.scheduler.max_num_seqs: ...".
template <class F>
void with_key_prefix(const std::string& prefix, F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    throw ConfigError(prefix + e.what());
  }
}

}  // namespace testbed
