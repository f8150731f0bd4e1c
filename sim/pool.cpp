#include "sim/pool.h"

#include <algorithm>
#include <cctype>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "sim/instance_set.h"

namespace testbed {

const char* pool_role_name(PoolRole role) {
  switch (role) {
    case PoolRole::Unified: return "unified";
    case PoolRole::Prefill: return "prefill";
    case PoolRole::Decode: return "decode";
  }
  return "?";
}

PoolRole PoolConfig::parsed_role() const {
  if (role == "unified") return PoolRole::Unified;
  if (role == "prefill") return PoolRole::Prefill;
  if (role == "decode") return PoolRole::Decode;
  throw ConfigError(prefix() + "role: unknown role '" + role + "' (known: unified, prefill, decode)");
}

void PoolConfig::bind(OptionTable& t) {
  t.push_prefix(prefix());
  t.add_required("role", &role, "unified | prefill | decode");
  t.add_required("size", &size, "instances in the pool");
  engine.bind(t);
  cost_model.bind(t);
  router.bind(t);
  link.bind(t);
  t.pop_prefix();
}

void PoolConfig::validate() const {
  parsed_role();
  require(size >= 1 && size <= kMaxInstances, prefix() + "size", "must be in [1, " + std::to_string(kMaxInstances) + "]");
  with_key_prefix(prefix(), [&] {
    engine.validate();
    cost_model.validate();
    router.validate();
    link.validate();
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

void validate_pools(const std::vector<PoolConfig>& pools) {
  int ingress = 0, prefill = 0, decode = 0;
  const PoolConfig *p = nullptr, *d = nullptr;
  for (const PoolConfig& pool : pools) {
    pool.validate();
    switch (pool.parsed_role()) {
      case PoolRole::Unified: ++ingress; break;
      case PoolRole::Prefill: ++ingress, ++prefill, p = &pool; break;
      case PoolRole::Decode: ++decode, d = &pool; break;
    }
  }
  if (pools.empty()) return;
  const std::string first = pools.front().prefix() + "role";
  require(ingress == 1, first,
          "a cluster has exactly one pool that takes arrivals (role unified or prefill); this one has " +
              std::to_string(ingress));
  if (decode != prefill)
    throw ConfigError((d ? d->prefix() : p->prefix()) + "role: a prefill pool hands its sequences to one decode pool: give one of each");
  if (p && d && p->engine.cache.block_size != d->engine.cache.block_size)
    require(p->engine.cache.block_size == d->engine.cache.block_size, d->prefix() + "cache.block_size",
            "must equal " + p->prefix() + "cache.block_size (" + std::to_string(p->engine.cache.block_size) +
                "): KV moves block by block");
}

}  // namespace testbed
