// Registry: policies chosen by name from config. Adding a policy is one new file
// with one TESTBED_REGISTER line; nothing central to edit.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/config_error.h"

namespace testbed {

template <class Base, class... Args>
class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Base>(Args...)>;

  static Registry& instance() {
    static Registry registry;
    return registry;
  }
  bool add(const std::string& name, Factory factory) {
    factories_[name] = std::move(factory);
    return true;
  }
  bool contains(const std::string& name) const { return factories_.count(name) != 0; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& kv : factories_) out.push_back(kv.first);
    return out;
  }
  std::string names_joined() const {
    std::string out;
    for (const auto& kv : factories_) out += (out.empty() ? "" : ", ") + kv.first;
    return out;
  }
  // `key` names the config key in the error when `name` is unknown.
  std::unique_ptr<Base> create(const std::string& key, const std::string& name, Args... args) const {
    auto it = factories_.find(name);
    if (it == factories_.end())
      throw ConfigError(key + ": unknown value '" + name + "' (known: " + names_joined() + ")");
    return it->second(std::forward<Args>(args)...);
  }

 private:
  std::map<std::string, Factory> factories_;
};

#define TESTBED_CONCAT_INNER(a, b) a##b
#define TESTBED_CONCAT(a, b) TESTBED_CONCAT_INNER(a, b)
// TESTBED_REGISTER(RegistryType, "name", factory_lambda);
#define TESTBED_REGISTER(RegistryType, name, ...) \
  static const bool TESTBED_CONCAT(testbed_registered_, __LINE__) = RegistryType::instance().add(name, __VA_ARGS__)

}  // namespace testbed
