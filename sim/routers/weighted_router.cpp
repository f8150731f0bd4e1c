// weighted: llm-d's scoring scheduler. Each instance scores
//   weight_prefix * (cached prefix blocks / prompt blocks)    (precise, from KvEvents)
// + weight_queue  * (max_queue - queue) / (max_queue - min_queue)
// + weight_kv     * (1 - KV usage)
// and the highest score wins (defaults 3, 2, 2 as llm-d ships; ties rotate).
// "queue" is the requests waiting in the instance's scheduler.
#include <algorithm>

#include "engine/common/option_table.h"
#include "sim/routers/kv_index_router.h"

namespace testbed {
namespace {

struct WeightedParams : ParamsOf<WeightedParams> {
  double weight_prefix = 3.0, weight_queue = 2.0, weight_kv = 2.0;  // llm-d's defaults
  void bind(OptionTable& t) override {
    t.add("router.weight_prefix", &weight_prefix, "weighted: prefix-match scorer weight");
    t.add("router.weight_queue", &weight_queue, "weighted: queue-depth scorer weight");
    t.add("router.weight_kv", &weight_kv, "weighted: KV-usage scorer weight");
  }
  void validate() const override {
    require(weight_prefix >= 0 && weight_queue >= 0 && weight_kv >= 0, "router.weight_prefix", "weights must be >= 0");
  }
};

class WeightedRouter : public KvIndexRouter {
 public:
  WeightedRouter(int n, const WeightedParams& c, int blocks_per_instance)
      : KvIndexRouter(n, blocks_per_instance), n_(n), c_(c) {}
  int route(const RoutingContext& ctx) override {
    const std::vector<int>& matched = match(ctx);
    int qmin = 1 << 30, qmax = 0;
    for (const InstanceLoad& l : ctx.loads) {
      qmin = std::min(qmin, l.num_waiting);
      qmax = std::max(qmax, l.num_waiting);
    }
    const double blocks = std::max<size_t>(ctx.block_hashes.size(), 1);
    const int start = static_cast<int>(next_++ % n_);
    int best = -1;
    double best_score = 0;
    for (int k = 0; k < n_; ++k) {
      const int i = (start + k) % n_;
      const InstanceLoad& l = ctx.loads[i];
      const double prefix = matched[i] / blocks;
      const double queue = qmax > qmin ? static_cast<double>(qmax - l.num_waiting) / (qmax - qmin) : 1.0;
      const double kv = 1.0 - l.kv_usage;
      const double score = c_.weight_prefix * prefix + c_.weight_queue * queue + c_.weight_kv * kv;
      if (best < 0 || score > best_score) {
        best = i;
        best_score = score;
      }
    }
    return best;
  }

 private:
  int n_;
  WeightedParams c_;
  uint64_t next_ = 0;
};

TESTBED_REGISTER(RouterRegistry, "weighted", [](const WeightedParams& p, const RouterSetup& s) {
  return std::make_unique<WeightedRouter>(s.num_instances, p, s.blocks_per_instance);
});

}  // namespace
}  // namespace testbed
