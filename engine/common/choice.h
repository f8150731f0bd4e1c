// Choice: a config key that names a registered component (router.type,
// cost_model.kind, scheduler.policy, ...) together with the parameters of
// every candidate. All candidates' keys are bound, so a config may set any of
// them; the chosen one's are validated and handed to its factory.
//
//   Choice<RouterRegistry> router{"router.type", "round_robin", "how arrivals pick an instance"};
//   router.bind(table);                       // router.type and every router's own keys
//   router.validate();                        // a known name, valid parameters
//   auto r = router.create(setup);            // the chosen router with its parameters
#pragma once

#include <map>
#include <memory>
#include <string>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/common/params.h"

namespace testbed {

template <class Registry>
class Choice {
 public:
  Choice(std::string key, std::string default_name, std::string help)
      : name(std::move(default_name)), key_(std::move(key)), help_(std::move(help)) {}
  Choice(const Choice& o) : name(o.name), key_(o.key_), help_(o.help_) {
    for (const auto& [n, p] : o.params_) params_[n] = p->clone();
  }
  Choice& operator=(const Choice& o) {
    if (this != &o) *this = Choice(o);
    return *this;
  }
  Choice(Choice&&) = default;
  Choice& operator=(Choice&&) = default;

  std::string name;  // the chosen component

  const std::string& key() const { return key_; }

  // Binds the key and the keys of every registered candidate.
  void bind(OptionTable& table) {
    table.add(key_, &name, help_ + " (" + Registry::instance().names_joined() + ")");
    for (const std::string& n : Registry::instance().names()) {
      table.push_condition(key_, n);  // a candidate's keys are used when it is the one chosen
      params(n).bind(table);
      table.pop_condition();
    }
  }
  // A registered name, and valid parameters for every candidate (chosen or
  // not: a bad value in a config never waits for the run that selects it).
  void validate() const {
    require(Registry::instance().contains(name), key_,
            "unknown value '" + name + "' (known: " + Registry::instance().names_joined() + ")");
    for (const std::string& n : Registry::instance().names()) params(n).validate();
    params(name).validate_selected();
  }
  // The parameters of candidate `n` (its defaults until bound and set).
  Params& params(const std::string& n) const {
    auto it = params_.find(n);
    if (it == params_.end()) it = params_.emplace(n, Registry::instance().make_params(key_, n)).first;
    return *it->second;
  }
  const Params& chosen_params() const { return params(name); }

  template <class... A>
  auto create(A&&... args) const {
    validate();
    return Registry::instance().create(key_, name, chosen_params(), std::forward<A>(args)...);
  }

 private:
  std::string key_, help_;
  mutable std::map<std::string, std::unique_ptr<Params>> params_;
};

}  // namespace testbed
