// The part the precise routers share: a KvEventIndex fed by every instance's
// KV events, which commute across instances (a bit per instance and block),
// and a match a fleet's worker may prepare ahead (Router::prepare).
#pragma once

#include "sim/prefix_index.h"
#include "sim/router.h"

namespace testbed {

class KvIndexRouter : public Router {
 public:
  KvIndexRouter(int num_instances, int blocks_per_instance)
      : index_(num_instances, static_cast<size_t>(num_instances) * blocks_per_instance) {}
  bool wants_kv_events() const override { return true; }
  void on_kv_event(int instance, const KvEvent& e) override { index_.apply(instance, e); }
  void on_kv_events(int instance, const KvEvent* events, size_t n) override { index_.apply(instance, events, n); }
  bool kv_events_commute() const override { return true; }
  bool needs_block_hashes() const override { return true; }
  void prepare(const Request& request, const std::vector<uint64_t>& block_hashes) override {
    index_.prepare(request.id, block_hashes);
  }
  const PrefixIndex* prefix_index() const override { return &index_.index(); }

 protected:
  // The longest cached run of the request's leading blocks, per instance.
  const std::vector<int>& match(const RoutingContext& ctx) { return index_.match(ctx.request.id, ctx.block_hashes); }

 private:
  KvEventIndex index_;  // sized for every instance's blocks at once: no rehash mid-run
};

}  // namespace testbed
