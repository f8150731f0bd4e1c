// The pool roles (pool.NAME.role), each one registration: what the fleet
// does with the pool's instances (sim/pool.h).
#include "sim/pool.h"

namespace testbed {
namespace {

class Role : public PoolRole {
 public:
  Role(bool arrivals, bool hands_off, bool receives) : arrivals_(arrivals), hands_off_(hands_off), receives_(receives) {}
  bool takes_arrivals() const override { return arrivals_; }
  bool hands_off_after_prefill() const override { return hands_off_; }
  bool receives_handoffs() const override { return receives_; }

 private:
  bool arrivals_, hands_off_, receives_;
};

// Whole requests, as a plain fleet's instances.
TESTBED_REGISTER(PoolRoleRegistry, "unified",
                 [](const PoolRoleSetup&) { return std::make_unique<Role>(true, false, false); });
// Arrivals are prefilled here; each sequence leaves after its first token, with its KV.
TESTBED_REGISTER(PoolRoleRegistry, "prefill",
                 [](const PoolRoleSetup&) { return std::make_unique<Role>(true, true, false); });
// Handed-off sequences decode here.
TESTBED_REGISTER(PoolRoleRegistry, "decode",
                 [](const PoolRoleSetup&) { return std::make_unique<Role>(false, false, true); });

}  // namespace
}  // namespace testbed
