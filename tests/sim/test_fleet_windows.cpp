// A fleet on several threads (sim/fleet_windows.cpp) and what it rests on:
// the event loop's owned events and numbering, RunRecorder's deferred
// reports, and one-thread results when instances' steps tie in time (the
// replay must order them by the numbers one thread's loop gave them).
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>

#include "engine/common/config_error.h"
#include "engine/metrics/run_recorder.h"
#include "sim/cost_model.h"
#include "sim/event_loop.h"
#include "sim/faults.h"
#include "sim/fleet.h"
#include "sim/prefix_index.h"
#include "sim/sim_executor.h"
#include "sim/simulated_driver.h"
#include "support/engine_harness.h"
#include "support/sim_harness.h"

using namespace testbed;

namespace {

// The simulated executor, but its `fail_at`-th step raises an error naming the instance.
class FailingExecutor : public Executor {
 public:
  FailingExecutor(std::shared_ptr<const CostModel> cost, int instance, int fail_at)
      : inner_(std::move(cost), 1000), instance_(instance), fail_at_(fail_at) {}
  StepResult execute(const Batch& batch) override {
    StepResult out;
    execute(batch, out);
    return out;
  }
  void execute(const Batch& batch, StepResult& out) override {
    if (++steps_ == fail_at_) throw ConfigError("instance " + std::to_string(instance_) + " failed its step");
    inner_.execute(batch, out);
  }
  std::string name() const override { return "failing"; }

 private:
  SimExecutor inner_;
  int instance_, fail_at_, steps_ = 0;
};

struct Outcome {
  std::vector<RequestRecord> requests;
  std::vector<CancelRecord> cancelled;
  std::vector<StepRecord> steps;
  std::vector<RequestEvent> events;
  SimulationStats stats;
  std::vector<std::pair<uint64_t, int>> index;  // the router's prefix index at the end: (block, instance), sorted
  std::vector<std::pair<uint64_t, int>> caches;  // what the engines' prefix caches hold at the end, the same way
};

// `n` instances behind `router`; every engine reports to one recorder (steps and events kept).
// fail_at[i] > 0: instance i's executor raises an error at that step.
// `custom`: this router instead of `router`'s.
Outcome run(int threads, int n, const std::string& router, std::vector<Request> requests, int num_blocks = 400,
            const std::vector<int>& fail_at = {}, const FaultConfig& faults = {}, double refresh_s = 0.0,
            std::unique_ptr<Router> custom = nullptr) {
  const ModelConfig model = test::micro_model(1000);
  std::shared_ptr<const CostModel> cost = test::linear_cost(model);
  EngineConfig cfg;
  cfg.max_model_len = 1024;
  cfg.scheduler.max_batch_tokens = 1024;
  RunRecorder rec(/*keep_steps=*/true, /*keep_tokens=*/false, /*keep_events=*/true);
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<FleetPool> pools(1);
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<Executor> exec;
    if (i < static_cast<int>(fail_at.size()) && fail_at[i] > 0)
      exec = std::make_unique<FailingExecutor>(cost, i, fail_at[i]);
    else
      exec = std::make_unique<SimExecutor>(cost, 1000);
    engines.push_back(std::make_unique<Engine>(i, cfg, num_blocks, std::move(exec), &rec));
    pools[0].engines.push_back(engines.back().get());
  }
  RouterSetup rs;
  rs.num_instances = n;
  rs.blocks_per_instance = num_blocks;
  pools[0].router = custom ? std::move(custom) : make_router(router_choice(router), rs);
  FleetOptions options;
  options.sink = &rec;
  options.log_events = true;
  options.threads = threads;
  options.faults = faults;
  options.router_refresh_s = refresh_s;
  Fleet fleet(std::move(pools), options);
  test::ListSource source(std::move(requests));
  Outcome out;
  out.stats = fleet.run(source, nullptr);
  out.requests = rec.requests();
  out.cancelled = rec.cancelled();
  out.steps = rec.steps();
  out.events = rec.events();
  if (const PrefixIndex* index = fleet.router(0).prefix_index()) {
    index->for_each([&](uint64_t hash, const InstanceSet& holders) {
      holders.for_each([&](int i) { out.index.emplace_back(hash, i); });
    });
    std::sort(out.index.begin(), out.index.end());
  }
  for (int i = 0; i < n; ++i) engines[i]->kv_cache().for_each_cached([&](uint64_t hash) { out.caches.emplace_back(hash, i); });
  std::sort(out.caches.begin(), out.caches.end());
  return out;
}

void check_same(const Outcome& a, const Outcome& b) {
  CHECK(a.stats.num_events == b.stats.num_events);
  CHECK(a.stats.simulated_s == b.stats.simulated_s);
  REQUIRE(a.requests.size() == b.requests.size());
  for (size_t k = 0; k < a.requests.size(); ++k) {
    INFO("request record " << k);
    CHECK(a.requests[k].id == b.requests[k].id);
    CHECK(a.requests[k].instance == b.requests[k].instance);
    CHECK(a.requests[k].first_token_s == b.requests[k].first_token_s);
    CHECK(a.requests[k].finish_s == b.requests[k].finish_s);
    CHECK(a.requests[k].cached_tokens == b.requests[k].cached_tokens);
  }
  REQUIRE(a.steps.size() == b.steps.size());
  for (size_t k = 0; k < a.steps.size(); ++k) {
    INFO("step record " << k);
    CHECK(a.steps[k].instance == b.steps[k].instance);
    CHECK(a.steps[k].start_s == b.steps[k].start_s);
    CHECK(a.steps[k].kv_blocks_used == b.steps[k].kv_blocks_used);
  }
  REQUIRE(a.events.size() == b.events.size());
  for (size_t k = 0; k < a.events.size(); ++k) {
    INFO("event " << k);
    CHECK(a.events[k].kind == b.events[k].kind);
    CHECK(a.events[k].request == b.events[k].request);
    CHECK(a.events[k].instance == b.events[k].instance);
    CHECK(a.events[k].t == b.events[k].t);
  }
  // The KV events a worker applied to the router's index while the replay went on: the same index.
  CHECK(a.index == b.index);
}

// n identical requests arriving together: one per instance under round_robin, in lock step.
std::vector<Request> simultaneous(int n, int prompt, int output) {
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    r.arrival_s = 0.5;
    r.prompt.assign(prompt, 7);
    r.max_output_tokens = output;
    out.push_back(std::move(r));
  }
  return out;
}

// What a RecordingRouter heard and did.
struct Recording {
  struct Call {
    int instance;
    uint64_t hash;
    KvEvent::Kind kind;
    bool operator==(const Call& o) const { return instance == o.instance && hash == o.hash && kind == o.kind; }
  };
  std::vector<Call> calls;  // every KV event, in the order it came
  int64_t prepared = 0, reused = 0;
  std::vector<Call> of(int instance) const {
    std::vector<Call> out;
    for (const Call& c : calls)
      if (c.instance == instance) out.push_back(c);
    return out;
  }
};

// prefix_precise's decisions, every KV event kept in `rec`; it commutes them or not as asked.
class RecordingRouter : public Router {
 public:
  RecordingRouter(int n, bool commute, Recording& rec) : n_(n), commute_(commute), rec_(rec), index_(n, 4096) {}
  ~RecordingRouter() override { rec_.reused = index_.num_reused(); }
  bool wants_kv_events() const override { return true; }
  bool kv_events_commute() const override { return commute_; }
  bool needs_block_hashes() const override { return true; }
  void on_kv_event(int instance, const KvEvent& e) override { on_kv_events(instance, &e, 1); }
  void on_kv_events(int instance, const KvEvent* events, size_t n) override {
    for (size_t k = 0; k < n; ++k) rec_.calls.push_back({instance, events[k].block_hash, events[k].kind});
    index_.apply(instance, events, n);
  }
  void prepare(const Request& request, const std::vector<uint64_t>& hashes) override {
    ++rec_.prepared;
    index_.prepare(request.id, hashes);
  }
  int route(const RoutingContext& ctx) override {
    return longest_match_least_loaded(ctx.loads, index_.match(ctx.request.id, ctx.block_hashes), next_++ % n_);
  }

 private:
  int n_;
  bool commute_;
  Recording& rec_;
  KvEventIndex index_;
  int next_ = 0;
};

}  // namespace

TEST_CASE("owned events run like others and can be taken out, numbered and put back", "[event_loop][threads]") {
  EventLoop loop;
  std::vector<int> ran;
  loop.at(1.0, kRankArrival, [&](double) { ran.push_back(0); });
  loop.at_owned(1.0, kRankStepEnd, 3, 7, [&](double) { ran.push_back(1); });
  loop.at_owned(0.5, kRankStepStart, 2, 0, [&](double) { ran.push_back(2); });
  CHECK(loop.next_is_owned());
  const EventLoop::Owned o = loop.take_owned();
  CHECK(o.time == 0.5);
  CHECK(o.owner == 2);
  CHECK(o.rank == kRankStepStart);
  CHECK(o.seq == 2);
  CHECK(loop.num_processed() == 0);  // counted when replayed or skipped
  loop.replayed(0.5);
  CHECK(loop.now() == 0.5);
  CHECK(loop.num_processed() == 1);
  CHECK_THROWS_AS(loop.replayed(0.25), std::logic_error);
  double t = 0;
  int rank = -1;
  REQUIRE(loop.peek(t, rank));
  CHECK(t == 1.0);
  CHECK(rank == kRankArrival);
  CHECK(!loop.next_is_owned());
  CHECK_THROWS_AS(loop.take_owned(), std::logic_error);
  // A number taken now sorts after every event already in the loop, as at() would have numbered it.
  const uint64_t seq = loop.take_seq();
  CHECK(seq == 3);
  CHECK_THROWS_AS(loop.at_owned_seq(1.0, kRankArrival, 4, 1, 0, [](double) {}), std::logic_error);  // not taken
  loop.at_owned_seq(1.0, kRankArrival, seq, 1, 0, [&](double) { ran.push_back(3); });
  loop.run();
  CHECK(ran == std::vector<int>{0, 3, 1});
  CHECK(loop.num_processed() == 4);
}

TEST_CASE("a RunRecorder's deferred reports reach it in the order made, up to each mark", "[metrics][threads]") {
  RunRecorder direct(true, true), later(true, true);
  std::unique_ptr<DeferredSink> shard = later.make_deferred();
  REQUIRE(shard);
  Request q;
  q.id = 5;
  q.prompt = {1, 2, 3};
  q.max_output_tokens = 2;
  Sequence seq(q);
  seq.first_token_s = 0.25;
  StepRecord step;
  step.instance = 1;
  step.duration_s = 0.125;
  step.num_seqs = 3;
  KvEvent stored;
  stored.kind = KvEvent::Kind::BlockStored;
  for (MetricsSink* s : {static_cast<MetricsSink*>(&direct), static_cast<MetricsSink*>(shard.get())}) {
    s->on_arrival(1, seq, 0.0);
    s->on_token(1, seq, 0.3, 0.05);
    s->on_step(step);
    s->on_kv_event(1, stored);
  }
  const size_t mark = shard->size();
  for (MetricsSink* s : {static_cast<MetricsSink*>(&direct), static_cast<MetricsSink*>(shard.get())}) {
    s->on_finish(1, seq, 0.5);
    s->on_cancel(1, seq, 0.75, CancelReason::Tokens);
  }
  shard->deliver(mark);
  CHECK(later.num_arrived() == 1);
  CHECK(later.num_steps() == 1);
  CHECK(later.num_finished() == 0);  // after the mark: not yet
  shard->deliver(shard->size());
  CHECK_THROWS_AS(shard->deliver(mark), std::logic_error);  // delivered already
  CHECK(later.num_finished() == direct.num_finished());
  CHECK(later.requests()[0].id == 5);
  CHECK(later.requests()[0].finish_s == direct.requests()[0].finish_s);
  CHECK(later.cancelled().size() == 1);
  CHECK(later.busy_s() == direct.busy_s());
  CHECK(later.itl().count() == direct.itl().count());
  CHECK(later.num_blocks_stored() == 1);
  CHECK(later.output_token_ids() == direct.output_token_ids());
  CHECK_THROWS_AS(shard->on_sample(InstanceSample{}), std::logic_error);  // not a step's report
  shard->clear();
  CHECK(shard->size() == 0);
}

TEST_CASE("instances whose steps tie in time replay in the one-thread order", "[fleet][threads]") {
  // Four identical requests at once, one per instance: every step of every instance ends at the same time.
  const Outcome one = run(1, 4, "round_robin", simultaneous(4, 200, 12));
  REQUIRE(one.requests.size() == 4);
  for (const RequestRecord& r : one.requests) CHECK(r.finish_s == one.requests[0].finish_s);
  for (int threads : {2, 3}) {
    INFO("threads " << threads);
    check_same(one, run(threads, 4, "round_robin", simultaneous(4, 200, 12)));
  }
}

TEST_CASE("a fleet on several threads matches one thread under every router", "[fleet][threads]") {
  const std::vector<Request> requests = test::shared_prefix_requests(240, 256, 48, 20, 1000, 11, 0.004);
  for (const std::string& type : RouterRegistry::instance().names()) {
    INFO(type);
    const Outcome one = run(1, 6, type, requests);
    CHECK(one.requests.size() == 240);
    if (type == "prefix_precise") CHECK(!one.index.empty());
    check_same(one, run(2, 6, type, requests));
    check_same(one, run(4, 6, type, requests));
  }
}

TEST_CASE("KV events reach a router in one thread's order, or per instance when it commutes them",
          "[fleet][threads]") {
  const std::vector<Request> requests = test::shared_prefix_requests(240, 256, 48, 20, 1000, 11, 0.004);
  const int n = 6;
  Recording one;
  const Outcome base = run(1, n, "", requests, 400, {}, {}, 0.0, std::make_unique<RecordingRouter>(n, false, one));
  REQUIRE(one.calls.size() > 100);
  CHECK(one.prepared == 0);  // one thread works ahead of nothing
  for (int threads : {2, 4}) {
    INFO(threads << " threads");
    Recording ordered, commuted;
    const auto recording = [&](bool commute, Recording& rec) {
      return run(threads, n, "", requests, 400, {}, {}, 0.0, std::make_unique<RecordingRouter>(n, commute, rec));
    };
    check_same(base, recording(false, ordered));
    CHECK(ordered.calls == one.calls);  // the very calls one thread makes
    CHECK(ordered.reused <= ordered.prepared);
    check_same(base, recording(true, commuted));
    // Applied as each instance was stepped: every instance's events in its
    // order, the instances interleaved as they finished.
    REQUIRE(commuted.calls.size() == one.calls.size());
    for (int i = 0; i < n; ++i) CHECK(commuted.of(i) == one.of(i));
    // Whatever a worker prepared ahead (how much depends on when the workers
    // got a core), the decisions were one thread's (check_same).
    CHECK(commuted.reused <= commuted.prepared);
  }
}

TEST_CASE("an error a worker meets is the one-thread error, the first in time", "[fleet][threads]") {
  // In lock step, instance 2's 3rd step comes before instance 1's 5th: a worker
  // may reach either first, the run reports the one one thread would.
  std::string messages[3];
  for (int threads = 1; threads <= 3; ++threads) {
    try {
      run(threads, 4, "round_robin", simultaneous(4, 200, 12), 400, {0, 5, 3, 0});
    } catch (const ConfigError& e) {
      messages[threads - 1] = e.what();
    }
  }
  CHECK(messages[0] == "instance 2 failed its step");
  CHECK(messages[1] == messages[0]);
  CHECK(messages[2] == messages[0]);
}

TEST_CASE("the clock ends where one thread's does: a dropped step end, late KV events", "[fleet][threads]") {
  // Request 1's prefill on instance 1 (0.5 to 0.66 s) is in flight when the instance fails at 0.55 s: its end,
  // dropped, is the last event of the run (request 0 is done on instance 0 by then).
  std::vector<Request> requests = simultaneous(2, 100, 4);
  requests[1].prompt.assign(800, 9);
  requests[1].max_output_tokens = 40;
  FaultConfig lose;
  set_options(lose, {{"fault.fail", "1@0.55"}, {"fault.on_failure", "lose"}});
  const Outcome one = run(1, 2, "round_robin", requests, 400, {}, lose);
  CHECK(one.stats.simulated_s > 0.65);
  check_same(one, run(2, 2, "round_robin", requests, 400, {}, lose));
  // Index events 1 ms late: the last ones land after the last step end.
  FaultConfig late;
  set_options(late, {{"fault.kv_event_delay_s", "0.001"}});
  const std::vector<Request> shared = test::shared_prefix_requests(60, 256, 48, 6, 1000, 5, 0.003);
  const Outcome late_one = run(1, 4, "prefix_precise", shared, 400, {}, late);
  check_same(late_one, run(2, 4, "prefix_precise", shared, 400, {}, late));
}

// FleetOptions::router_refresh_s: the routers decide on a view renewed every
// so often, and a window of several threads spans the interval.

TEST_CASE("a refreshed view: several threads match one thread under every router", "[fleet][threads][refresh]") {
  const std::vector<Request> requests = test::shared_prefix_requests(240, 256, 48, 20, 1000, 11, 0.004);
  for (const double refresh : {0.001, 0.05}) {
    for (const std::string& type : RouterRegistry::instance().names()) {
      INFO(type << ", refresh every " << refresh << " s");
      const Outcome one = run(1, 6, type, requests, 400, {}, {}, refresh);
      CHECK(one.requests.size() == 240);
      CHECK(one.stats.num_finished == 240);
      if (type == "prefix_precise") CHECK(!one.index.empty());
      check_same(one, run(2, 6, type, requests, 400, {}, {}, refresh));
      check_same(one, run(4, 6, type, requests, 400, {}, {}, refresh));
    }
  }
  // Landings and steps tying in time: every request lands at once, in lock step.
  const Outcome tied = run(1, 4, "round_robin", simultaneous(8, 200, 12), 400, {}, {}, 0.25);
  check_same(tied, run(2, 4, "round_robin", simultaneous(8, 200, 12), 400, {}, {}, 0.25));
  check_same(tied, run(3, 4, "round_robin", simultaneous(8, 200, 12), 400, {}, {}, 0.25));
}

TEST_CASE("a refreshed view: loads as last read plus what the router sent since", "[fleet][refresh]") {
  // Three instances behind least_loaded. Request 0 decodes long on instance 0;
  // requests 1 and 2 are short and done before request 3 arrives.
  std::vector<Request> requests = simultaneous(4, 50, 2);
  requests[0].arrival_s = 0.0;
  requests[0].max_output_tokens = 400;
  for (int k = 1; k < 4; ++k) requests[k].arrival_s = 0.1 * k;
  const Outcome live = run(1, 3, "least_loaded", requests);
  REQUIRE(live.requests.size() == 4);
  auto record = [](const Outcome& o, int64_t id) {
    for (const RequestRecord& r : o.requests)
      if (r.id == id) return r;
    FAIL("no record of request " << id);
    return RequestRecord{};
  };
  REQUIRE(record(live, 0).finish_s > 0.35);
  REQUIRE(record(live, 1).finish_s < 0.3);
  REQUIRE(record(live, 2).finish_s < 0.3);
  CHECK(record(live, 0).instance == 0);
  CHECK(record(live, 1).instance == 1);
  CHECK(record(live, 2).instance == 2);
  // Live, request 3 avoids the busy instance 0 (its turn by rotation).
  CHECK(record(live, 3).instance == 1);
  // Refreshed every millisecond, the router sees nearly what it would live.
  const Outcome fresh = run(1, 3, "least_loaded", requests, 400, {}, {}, 0.001);
  for (int64_t id = 0; id < 4; ++id) CHECK(record(fresh, id).instance == record(live, id).instance);
  // Never refreshed after the first view (0 s): all four are decided on it,
  // each counted where it was sent, so instance 0 looks as loaded as the others.
  const Outcome stale = run(1, 3, "least_loaded", requests, 400, {}, {}, 1000.0);
  CHECK(record(stale, 3).instance == 0);
  CHECK(record(stale, 3).finish_s > record(live, 3).finish_s);  // it waits behind request 0's decode
  // The events log keeps arrival times; the clock ends at the last step, not at a refresh nobody needed.
  CHECK(stale.stats.simulated_s < 10.0);
  for (const RequestEvent& e : stale.events)
    if (e.kind == RequestEvent::Kind::Arrival || e.kind == RequestEvent::Kind::Route) CHECK(e.t == 0.1 * e.request);
}

TEST_CASE("a refreshed view: prefix routing decides on the KV events published by the refresh", "[fleet][refresh]") {
  // 60 requests sharing one prefix, 30 ms apart, behind prefix_precise on 4 instances.
  const std::vector<Request> requests = test::shared_prefix_requests(60, 256, 48, 6, 1000, 5, 0.03);
  auto hits = [](const Outcome& o) {
    int64_t cached = 0;
    for (const RequestRecord& r : o.requests) cached += r.cached_tokens;
    return cached;
  };
  const Outcome live = run(1, 4, "prefix_precise", requests);
  const Outcome fresh = run(1, 4, "prefix_precise", requests, 400, {}, {}, 0.001);
  const Outcome stale = run(1, 4, "prefix_precise", requests, 400, {}, {}, 1000.0);
  // Decided all at 0 s on an empty index, the requests spread by load alone
  // and the prefix is computed once per instance instead of once.
  CHECK(hits(stale) < hits(live));
  CHECK(hits(fresh) == hits(live));
  // Every event reached the router all the same: its index ends as the caches do.
  CHECK(stale.index == stale.caches);
  CHECK(fresh.index == fresh.caches);
  CHECK(!stale.index.empty());
}

TEST_CASE("a refreshed view: only the refreshes a decision reads are run", "[fleet][refresh]") {
  // Three requests an hour apart, a refresh every millisecond: a handful of events, not millions.
  std::vector<Request> requests = simultaneous(3, 50, 4);
  for (int k = 0; k < 3; ++k) requests[k].arrival_s = 3600.0 * k + 0.5;
  const Outcome live = run(1, 2, "round_robin", requests);
  const Outcome refreshed = run(1, 2, "round_robin", requests, 400, {}, {}, 0.001);
  CHECK(refreshed.stats.num_events <= live.stats.num_events + 3);
  CHECK(refreshed.stats.simulated_s == live.stats.simulated_s);
  for (size_t k = 0; k < live.requests.size(); ++k) CHECK(refreshed.requests[k].finish_s == live.requests[k].finish_s);
  check_same(refreshed, run(2, 2, "round_robin", requests, 400, {}, {}, 0.001));
}

TEST_CASE("a refreshed view: what it cannot model is refused, naming the key", "[fleet][refresh]") {
  FleetConfig bad;
  bad.router_refresh_s = -0.1;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("fleet.router_refresh_s"));
  bad.router_refresh_s = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("fleet.router_refresh_s"));
  bad.router_refresh_s = 0.01;
  CHECK_NOTHROW(bad.validate());
  const std::vector<Request> requests = simultaneous(2, 50, 4);
  FaultConfig fail;
  set_options(fail, {{"fault.fail", "1@0.55"}});
  CHECK_THROWS_WITH(run(1, 2, "round_robin", requests, 400, {}, fail, 0.01), Catch::Contains("fleet.router_refresh_s"));
  FaultConfig late;
  set_options(late, {{"fault.kv_event_delay_s", "0.001"}});
  CHECK_THROWS_WITH(run(1, 2, "prefix_precise", requests, 400, {}, late, 0.01),
                    Catch::Contains("fault.kv_event_delay_s"));
}
