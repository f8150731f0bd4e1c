#include "sim/pool.h"

#include <algorithm>
#include <cctype>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "sim/instance_set.h"

namespace testbed {

std::unique_ptr<PoolRole> PoolConfig::behavior() const {
  std::unique_ptr<PoolRole> r;
  with_key_prefix(prefix(), [&] { r = role.create(PoolRoleSetup{}); });
  return r;
}

void PoolConfig::bind(OptionTable& t) {
  t.push_prefix(prefix());
  role.bind(t);
  t.add_required("size", &size, "instances in the pool");
  engine.bind(t);
  cost_model.bind(t);
  router.bind(t);
  link.bind(t);
  autoscale.bind(t);
  t.add_path("model.config", &model_config, "the pool's model (config.json; default: the run's model.config)");
  t.pop_prefix();
}

void PoolConfig::validate() const {
  behavior();
  require(size >= 1 && size <= kMaxInstances, prefix() + "size", "must be in [1, " + std::to_string(kMaxInstances) + "]");
  with_key_prefix(prefix(), [&] {
    engine.validate();
    cost_model.validate();
    router.validate();
    link.validate();
    autoscale.validate(size);
  });
}

std::vector<std::string> pool_names(const std::vector<std::string>& keys) {
  std::vector<std::string> names;
  const std::string head = "pool.";
  for (const std::string& k : keys) {
    if (k.compare(0, head.size(), head) != 0) continue;
    const size_t dot = k.find('.', head.size());
    const std::string name = k.substr(head.size(), dot == std::string::npos ? std::string::npos : dot - head.size());
    const bool ok = !name.empty() && dot != std::string::npos &&
                    std::all_of(name.begin(), name.end(), [](char c) {
                      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                    });
    require(ok, k, "pool keys are pool.NAME.key with NAME of letters, digits, '_' or '-'");
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

void validate_pools(const std::vector<PoolConfig>& pools, bool model_routed) {
  int ingress = 0, senders = 0, receivers = 0;
  const PoolConfig *sender = nullptr, *receiver = nullptr;
  for (const PoolConfig& pool : pools) {
    pool.validate();
    ingress += pool.takes_arrivals();
    if (pool.hands_off_after_prefill()) ++senders, sender = &pool;
    if (pool.receives_handoffs()) ++receivers, receiver = &pool;
  }
  if (pools.empty()) return;
  const std::string first = pools.front().prefix() + "role";
  if (model_routed) return;  // ModelRoutingConfig::validate checks its pools
  require(ingress == 1, first,
          "a cluster has exactly one pool that takes arrivals (role unified or prefill); this one has " +
              std::to_string(ingress));
  if (senders > 1 || receivers > 1 || (senders == 1) != (receivers == 1)) {
    const PoolConfig* culprit = receiver && (receivers > 1 || !sender) ? receiver : sender;
    throw ConfigError(culprit->prefix() + "role: a prefill pool hands its sequences to one decode pool: give one of each");
  }
  if (sender && receiver && sender->engine.cache.block_size != receiver->engine.cache.block_size)
    require(false, receiver->prefix() + "cache.block_size",
            "must equal " + sender->prefix() + "cache.block_size (" + std::to_string(sender->engine.cache.block_size) +
                "): KV moves block by block");
}

}  // namespace testbed
