// Params: the config keys of one registered component (a router, a cost model,
// a workload, a scheduling policy ...), bound and validated next to its
// registration line, so adding a component never edits a shared struct.
//
//   struct WeightedParams : ParamsOf<WeightedParams> {
//     double weight_prefix = 3.0;
//     void bind(OptionTable& t) override { t.add("router.weight_prefix", &weight_prefix, "..."); }
//     void validate() const override { require(weight_prefix >= 0, "router.weight_prefix", "must be >= 0"); }
//   };
//   TESTBED_REGISTER(RouterRegistry, "weighted", [](const WeightedParams& p, const RouterSetup& s) { ... });
#pragma once

#include <memory>

namespace testbed {

class OptionTable;

class Params {
 public:
  virtual ~Params() = default;
  virtual void bind(OptionTable& table) = 0;
  // Throws ConfigError naming the offending key. Checked for every candidate
  // of a Choice, chosen or not.
  virtual void validate() const {}
  // Rules that hold only when this component is the one chosen (a file it must read).
  virtual void validate_selected() const {}
  virtual std::unique_ptr<Params> clone() const = 0;
};

// Gives a params struct its clone() (Base: Params, or a family's base such as WorkloadParams).
template <class Derived, class Base = Params>
class ParamsOf : public Base {
 public:
  std::unique_ptr<Params> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
};

// The params of a component without keys of its own.
struct NoParams final : ParamsOf<NoParams> {
  void bind(OptionTable&) override {}
};

}  // namespace testbed
