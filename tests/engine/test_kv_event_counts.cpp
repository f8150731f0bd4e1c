// An engine whose KV events only a counting sink hears (a RunRecorder, and no
// router listening) keeps two counts instead of the events: the recorder's
// stored and removed blocks are those of the same run with the events kept,
// as a sink that watches them and a listener count them.
#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "engine/metrics/run_recorder.h"
#include "sim/cost_model.h"
#include "sim/sim_executor.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

struct Counts {
  int64_t stored = 0, removed = 0;
  void add(const KvEvent& e) {
    stored += e.kind == KvEvent::Kind::BlockStored;
    removed += e.kind == KvEvent::Kind::BlockRemoved;
  }
};

// A RunRecorder that watches the events themselves: its engine must keep them.
class WatchingRecorder : public RunRecorder {
 public:
  void on_kv_events(int instance, const KvEvent* events, size_t n) override {
    RunRecorder::on_kv_events(instance, events, n);
    for (size_t i = 0; i < n; ++i) watched.add(events[i]);
  }
  Counts watched;
};

class CountingListener : public KvEventListener {
 public:
  void on_kv_event(const KvEvent& e) override { heard.add(e); }
  Counts heard;
};

std::unique_ptr<Engine> small_engine(MetricsSink* sink) {
  EngineConfig cfg;
  cfg.cache.block_size = 4;
  cfg.scheduler.max_num_seqs = 4;
  cfg.scheduler.max_batch_tokens = 64;
  cfg.max_model_len = 256;
  const ModelConfig model = micro_model(1000);
  // 40 blocks for 30 requests of 20-36 prompt tokens: cached blocks are evicted.
  return std::make_unique<Engine>(0, cfg, 40,
                                  std::make_unique<SimExecutor>(make_cost_model(CostModelConfig{}, model), 1000), sink);
}

std::vector<Request> requests() { return shared_prefix_requests(30, 16, 20, 6, 1000, 3, 0.004); }

}  // namespace

TEST_CASE("a counting sink hears the counts of the events it would have been sent", "[engine][kv_events]") {
  RunRecorder counted;
  auto a = small_engine(&counted);
  CHECK(a->kv_cache().counting_events());
  run_virtual(*a, requests());

  WatchingRecorder watching;
  auto b = small_engine(&watching);
  CHECK_FALSE(b->kv_cache().counting_events());
  CHECK(b->kv_cache().recording_events());
  run_virtual(*b, requests());

  RunRecorder with_listener;
  CountingListener listener;
  auto c = small_engine(&with_listener);
  c->add_kv_listener(&listener);  // a router's index needs the events themselves
  CHECK_FALSE(c->kv_cache().counting_events());
  run_virtual(*c, requests());

  REQUIRE(watching.watched.stored > 0);
  REQUIRE(watching.watched.removed > 0);  // the cache evicted
  CHECK(counted.num_blocks_stored() == watching.watched.stored);
  CHECK(counted.num_blocks_removed() == watching.watched.removed);
  CHECK(watching.num_blocks_stored() == watching.watched.stored);
  CHECK(with_listener.num_blocks_stored() == watching.watched.stored);
  CHECK(with_listener.num_blocks_removed() == watching.watched.removed);
  CHECK(listener.heard.stored == watching.watched.stored);
  CHECK(listener.heard.removed == watching.watched.removed);
  CHECK(counted.requests().size() == watching.requests().size());

  auto d = small_engine(nullptr);  // no sink and no listener: nothing recorded
  CHECK_FALSE(d->kv_cache().recording_events());
}

namespace {

// A RunRecorder that watches every token: its engine reports them one by one.
class TokenWatchingRecorder : public RunRecorder {
 public:
  void on_token(int instance, const Sequence& seq, double t, double gap_s) override {
    RunRecorder::on_token(instance, seq, t, gap_s);
    gaps.push_back(gap_s);
  }
  std::vector<double> gaps;
};

}  // namespace

TEST_CASE("a sink that takes only token gaps hears a step's in one call, the same gaps in the same order",
          "[engine][metrics]") {
  RunRecorder batched;
  CHECK(batched.takes_token_gaps_only());
  auto a = small_engine(&batched);
  run_virtual(*a, requests());

  TokenWatchingRecorder watching;
  CHECK_FALSE(watching.takes_token_gaps_only());  // a subclass may watch tokens
  auto b = small_engine(&watching);
  run_virtual(*b, requests());

  REQUIRE(watching.gaps.size() > 100);
  CHECK(batched.itl().count() == static_cast<int64_t>(watching.gaps.size()));
  // The histogram's sum is order-sensitive: the same mean, bit for bit, means the same adds in the same order.
  double sum = 0;
  for (double g : watching.gaps) sum += g;
  CHECK(batched.itl().mean() == sum / static_cast<double>(watching.gaps.size()));
  CHECK(batched.itl().mean() == watching.itl().mean());
  CHECK(batched.itl().quantile(0.5) == watching.itl().quantile(0.5));
  CHECK(batched.itl().quantile(0.99) == watching.itl().quantile(0.99));
}
