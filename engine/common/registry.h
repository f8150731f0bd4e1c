// Registry: components chosen by name from config, each with the config keys
// it owns (a Params struct). Adding one is one new file with one
// TESTBED_REGISTER line; nothing central to edit, no switch over names.
//
//   TESTBED_REGISTER(RouterRegistry, "round_robin", [](const RouterSetup& s) { ... });          // no keys
//   TESTBED_REGISTER(RouterRegistry, "weighted", [](const WeightedParams& p, const RouterSetup& s) { ... });
//
// The factory's first parameter, when it is a Params type, declares the
// component's keys; Choice (choice.h) binds them into a config.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/common/config_error.h"
#include "engine/common/params.h"

namespace testbed {

namespace registry_detail {
template <class F>
struct first_param;
template <class C, class R, class A0, class... As>
struct first_param<R (C::*)(A0, As...) const> {
  using type = std::decay_t<A0>;
};
template <class C, class R>
struct first_param<R (C::*)() const> {
  using type = void;
};
}  // namespace registry_detail

template <class Base, class... Args>
class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Base>(const Params&, Args...)>;

  static Registry& instance() {
    static Registry registry;
    return registry;
  }

  // Registers `factory`, callable as factory(Args...) or factory(const P&, Args...)
  // with P a Params struct holding the component's keys.
  template <class F>
  bool add(const std::string& name, F factory) {
    Entry e;
    if constexpr (std::is_invocable_v<F, Args...>) {
      e.make_params = [] { return std::make_unique<NoParams>(); };
      e.create = [factory](const Params&, Args... args) { return factory(std::forward<Args>(args)...); };
    } else {
      using P = typename registry_detail::first_param<decltype(&F::operator())>::type;
      static_assert(std::is_base_of_v<Params, P>, "a factory's first parameter is its Params struct");
      e.make_params = [] { return std::make_unique<P>(); };
      e.create = [factory](const Params& p, Args... args) {
        return factory(dynamic_cast<const P&>(p), std::forward<Args>(args)...);
      };
    }
    factories_[name] = std::move(e);
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
  // A fresh Params of `name` with its defaults. `key` names the config key in the error.
  std::unique_ptr<Params> make_params(const std::string& key, const std::string& name) const {
    return entry(key, name).make_params();
  }
  // Creates `name` from `params` (made by make_params for the same name).
  std::unique_ptr<Base> create(const std::string& key, const std::string& name, const Params& params,
                               Args... args) const {
    return entry(key, name).create(params, std::forward<Args>(args)...);
  }
  // Creates `name` with its default parameters.
  std::unique_ptr<Base> create(const std::string& key, const std::string& name, Args... args) const {
    const Entry& e = entry(key, name);
    return e.create(*e.make_params(), std::forward<Args>(args)...);
  }

 private:
  struct Entry {
    std::function<std::unique_ptr<Params>()> make_params;
    Factory create;
  };
  const Entry& entry(const std::string& key, const std::string& name) const {
    auto it = factories_.find(name);
    if (it == factories_.end())
      throw ConfigError(key + ": unknown value '" + name + "' (known: " + names_joined() + ")");
    return it->second;
  }
  std::map<std::string, Entry> factories_;
};

#define TESTBED_CONCAT_INNER(a, b) a##b
#define TESTBED_CONCAT(a, b) TESTBED_CONCAT_INNER(a, b)
// TESTBED_REGISTER(RegistryType, "name", factory_lambda);
#define TESTBED_REGISTER(RegistryType, name, ...) \
  static const bool TESTBED_CONCAT(testbed_registered_, __LINE__) = RegistryType::instance().add(name, __VA_ARGS__)

}  // namespace testbed
