// prefix_precise: the instance holding the longest cached prefix of the
// request, known exactly from the instances' KvEvents (stores and evictions),
// as llm-d's precise prefix-cache scorer learns it from vLLM's event stream.
// Ties (including "nobody has it") go to the least loaded instance.
#include "sim/prefix_index.h"
#include "sim/router.h"

namespace testbed {
namespace {

class PrefixPreciseRouter : public Router {
 public:
  // The index is sized for every instance's blocks at once: no rehash mid-run.
  PrefixPreciseRouter(int n, int blocks_per_instance)
      : n_(n), index_(n, static_cast<size_t>(n) * blocks_per_instance) {}
  bool wants_kv_events() const override { return true; }
  void on_kv_event(int instance, const KvEvent& e) override { index_.apply(instance, e); }
  void on_kv_events(int instance, const KvEvent* events, size_t n) override { index_.apply(instance, events, n); }
  bool kv_events_commute() const override { return true; }  // a bit per instance and block

  bool needs_block_hashes() const override { return true; }
  const PrefixIndex* prefix_index() const override { return &index_.index(); }
  void prepare(const Request& request, const std::vector<uint64_t>& block_hashes) override {
    index_.prepare(request.id, block_hashes);
  }
  int route(const RoutingContext& ctx) override {
    const std::vector<int>& matched = index_.match(ctx.request.id, ctx.block_hashes);
    return longest_match_least_loaded(ctx.loads, matched, static_cast<int>(next_++ % static_cast<uint64_t>(n_)));
  }

 private:
  int n_;
  KvEventIndex index_;
  uint64_t next_ = 0;
};

TESTBED_REGISTER(RouterRegistry, "prefix_precise",
                 [](const RouterSetup& s) {
  return std::make_unique<PrefixPreciseRouter>(s.num_instances, s.blocks_per_instance);
});

}  // namespace
}  // namespace testbed
