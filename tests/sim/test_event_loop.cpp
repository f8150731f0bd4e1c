// EventLoop: events run in (time, rank, insertion order); equal times run in
// EventRank order whatever the insertion order; handlers may schedule more events,
// at the current time too; an event in the past throws; now(), num_processed(),
// step() on an empty loop, and run_until(t) (runs time <= t, sets now to t, leaves
// later events queued).
#include <catch2/catch.hpp>
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "engine/common/rng.h"
#include "sim/event_loop.h"

using namespace testbed;

namespace {

// What a handler saw when it ran: its label, the now() passed in, and loop.now().
struct Ran {
  int label;
  double arg_now;
  double loop_now;
};

// Schedules an event that records its label when it runs.
void record(EventLoop& loop, std::vector<Ran>& log, double time, int rank, int label) {
  loop.at(time, rank, [&loop, &log, label](double now) { log.push_back({label, now, loop.now()}); });
}

std::vector<int> labels(const std::vector<Ran>& log) {
  std::vector<int> v;
  for (const Ran& r : log) v.push_back(r.label);
  return v;
}

}  // namespace

TEST_CASE("a new event loop is empty at time zero", "[event_loop]") {
  EventLoop loop;
  CHECK(loop.empty());
  CHECK(loop.now() == 0.0);
  CHECK(loop.num_processed() == 0);
  CHECK_FALSE(loop.step());
  CHECK(loop.num_processed() == 0);
  CHECK(loop.now() == 0.0);
  loop.run();  // nothing to do, returns
  CHECK(loop.empty());
}

TEST_CASE("events run in time order whatever the insertion order", "[event_loop]") {
  EventLoop loop;
  std::vector<Ran> log;
  const std::vector<double> times = {5.0, 1.0, 3.0, 0.5, 4.0, 2.0, 10.0, 0.0};
  for (size_t i = 0; i < times.size(); ++i) record(loop, log, times[i], kRankControl, static_cast<int>(i));
  CHECK_FALSE(loop.empty());
  loop.run();
  CHECK(loop.empty());
  REQUIRE(log.size() == times.size());
  // Expected: labels sorted by their time.
  std::vector<int> expected(times.size());
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int>(i);
  std::sort(expected.begin(), expected.end(), [&](int a, int b) { return times[a] < times[b]; });
  CHECK(labels(log) == expected);
  for (const Ran& r : log) {
    CHECK(r.arg_now == times[r.label]);   // the handler gets its event's time
    CHECK(r.loop_now == times[r.label]);  // and now() says the same while it runs
  }
  CHECK(loop.now() == 10.0);
  CHECK(loop.num_processed() == static_cast<int64_t>(times.size()));
}

TEST_CASE("equal times run in EventRank order whatever the insertion order", "[event_loop]") {
  const std::vector<int> ranks = {kRankArrival, kRankTransfer, kRankStepEnd, kRankStepStart, kRankControl};
  CHECK(kRankArrival < kRankTransfer);
  CHECK(kRankTransfer < kRankStepEnd);
  CHECK(kRankStepEnd < kRankStepStart);
  CHECK(kRankStepStart < kRankControl);
  // Every insertion order of the five ranks (all 120 permutations).
  std::vector<int> order = ranks;
  std::sort(order.begin(), order.end());
  int permutations = 0;
  do {
    EventLoop loop;
    std::vector<Ran> log;
    for (int rank : order) record(loop, log, 2.5, rank, rank);  // label = rank
    loop.run();
    CHECK(labels(log) == ranks);
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(permutations == 120);
}

TEST_CASE("time comes before rank: a lower rank at a later time runs later", "[event_loop]") {
  EventLoop loop;
  std::vector<Ran> log;
  record(loop, log, 2.0, kRankArrival, 0);
  record(loop, log, 1.0, kRankControl, 1);
  record(loop, log, 1.0, kRankArrival, 2);
  record(loop, log, 2.0, kRankControl, 3);
  loop.run();
  CHECK(labels(log) == std::vector<int>{2, 1, 0, 3});
}

TEST_CASE("equal time and rank run in insertion order", "[event_loop]") {
  EventLoop loop;
  std::vector<Ran> log;
  for (int i = 0; i < 50; ++i) record(loop, log, 7.0, kRankStepEnd, i);
  loop.run();
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[i] = i;
  CHECK(labels(log) == expected);
}

TEST_CASE("random events run in (time, rank, insertion) order", "[event_loop][property]") {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Rng rng(seed);
    EventLoop loop;
    std::vector<Ran> log;
    std::vector<std::tuple<double, int, int>> keys;  // (time, rank, label = insertion index)
    for (int i = 0; i < 500; ++i) {
      const double time = static_cast<double>(rng.below(20)) * 0.25;  // many ties
      const int rank = static_cast<int>(rng.below(5));
      keys.emplace_back(time, rank, i);
      record(loop, log, time, rank, i);
    }
    loop.run();
    std::sort(keys.begin(), keys.end());  // brute-force reference: lexicographic order
    std::vector<int> expected;
    for (const auto& k : keys) expected.push_back(std::get<2>(k));
    CHECK(labels(log) == expected);
    CHECK(loop.num_processed() == 500);
  }
}

TEST_CASE("handlers may schedule more events, at later and at the current time", "[event_loop]") {
  EventLoop loop;
  std::vector<std::string> log;
  // At t=1 a step ends; it schedules, at the same time, an arrival (lower rank:
  // runs next, before the step start already queued at t=1), a second step end
  // (same rank: runs after the step end already queued, by insertion order), a
  // control event (higher rank: after the queued step start), and a later event.
  loop.at(1.0, kRankStepEnd, [&](double now) {
    log.push_back("end-a");
    loop.at(now, kRankArrival, [&](double) { log.push_back("arrival"); });
    loop.at(now, kRankStepEnd, [&](double) { log.push_back("end-c"); });
    loop.at(now, kRankControl, [&](double) { log.push_back("control"); });
    loop.at(now + 1.0, kRankArrival, [&](double t) {
      log.push_back("later");
      CHECK(t == 2.0);
    });
  });
  loop.at(1.0, kRankStepEnd, [&](double) { log.push_back("end-b"); });
  loop.at(1.0, kRankStepStart, [&](double) { log.push_back("start"); });
  loop.run();
  CHECK(log == std::vector<std::string>{"end-a", "arrival", "end-b", "end-c", "start", "control", "later"});
  CHECK(loop.num_processed() == 7);
  CHECK(loop.now() == 2.0);
  CHECK(loop.empty());
}

TEST_CASE("a chain of events scheduled by handlers runs to the end", "[event_loop]") {
  EventLoop loop;
  int fired = 0;
  std::function<void(double)> tick = [&](double now) {
    ++fired;
    CHECK(now == Approx(0.5 * fired));
    if (fired < 10) loop.at(now + 0.5, kRankStepStart, tick);
  };
  loop.at(0.5, kRankStepStart, tick);
  loop.run();
  CHECK(fired == 10);
  CHECK(loop.num_processed() == 10);
  CHECK(loop.now() == Approx(5.0));
}

TEST_CASE("scheduling an event in the past throws", "[event_loop]") {
  EventLoop loop;
  CHECK_THROWS_AS(loop.at(-1.0, kRankArrival, [](double) {}), std::logic_error);
  CHECK(loop.empty());  // the rejected event was not queued

  loop.at(3.0, kRankArrival, [](double) {});
  REQUIRE(loop.step());
  REQUIRE(loop.now() == 3.0);
  CHECK_THROWS_AS(loop.at(2.999, kRankControl, [](double) {}), std::logic_error);
  CHECK(loop.empty());
  CHECK_NOTHROW(loop.at(3.0, kRankArrival, [](double) {}));  // the current time is not the past
  CHECK_FALSE(loop.empty());

  // From inside a handler too.
  bool threw = false;
  loop.at(4.0, kRankControl, [&](double now) {
    try {
      loop.at(now - 0.5, kRankArrival, [](double) {});
    } catch (const std::logic_error&) {
      threw = true;
    }
  });
  loop.run();
  CHECK(threw);
  CHECK(loop.num_processed() == 3);
  CHECK(loop.empty());

  // run_until moves now forward, so earlier times become the past.
  loop.run_until(10.0);
  CHECK_THROWS_AS(loop.at(9.0, kRankArrival, [](double) {}), std::logic_error);
}

TEST_CASE("step runs one event at a time and advances now", "[event_loop]") {
  EventLoop loop;
  std::vector<Ran> log;
  record(loop, log, 2.0, kRankArrival, 0);
  record(loop, log, 1.0, kRankArrival, 1);
  record(loop, log, 3.0, kRankArrival, 2);
  REQUIRE(loop.step());
  CHECK(labels(log) == std::vector<int>{1});
  CHECK(loop.now() == 1.0);
  CHECK(loop.num_processed() == 1);
  REQUIRE(loop.step());
  CHECK(loop.now() == 2.0);
  CHECK(loop.num_processed() == 2);
  REQUIRE(loop.step());
  CHECK(loop.now() == 3.0);
  CHECK(loop.num_processed() == 3);
  CHECK(loop.empty());
  CHECK_FALSE(loop.step());
  CHECK(loop.num_processed() == 3);
  CHECK(loop.now() == 3.0);
  CHECK(labels(log) == std::vector<int>{1, 0, 2});
}

TEST_CASE("run_until runs every event up to and including t and leaves later ones queued", "[event_loop]") {
  EventLoop loop;
  std::vector<Ran> log;
  record(loop, log, 1.0, kRankArrival, 0);
  record(loop, log, 2.0, kRankControl, 1);
  record(loop, log, 2.0, kRankArrival, 2);
  record(loop, log, 2.0000001, kRankArrival, 3);
  record(loop, log, 5.0, kRankArrival, 4);

  loop.run_until(2.0);
  CHECK(labels(log) == std::vector<int>{0, 2, 1});  // t <= 2, in (time, rank) order
  CHECK(loop.now() == 2.0);
  CHECK(loop.num_processed() == 3);
  CHECK_FALSE(loop.empty());

  loop.run_until(3.5);  // now is set to t even though the last event ran earlier
  CHECK(labels(log) == std::vector<int>{0, 2, 1, 3});
  CHECK(loop.now() == 3.5);
  CHECK(loop.num_processed() == 4);
  CHECK_FALSE(loop.empty());

  loop.run_until(4.0);  // no event in (3.5, 4]: only now moves
  CHECK(log.size() == 4);
  CHECK(loop.now() == 4.0);
  CHECK(loop.num_processed() == 4);

  // The queued event still runs at its own time, and the loop's now follows it.
  REQUIRE(loop.step());
  CHECK(labels(log) == std::vector<int>{0, 2, 1, 3, 4});
  CHECK(log.back().arg_now == 5.0);
  CHECK(loop.now() == 5.0);
  CHECK(loop.empty());
}

TEST_CASE("run_until also runs events that handlers add within the window", "[event_loop]") {
  EventLoop loop;
  std::vector<double> ran;
  loop.at(1.0, kRankStepEnd, [&](double now) {
    ran.push_back(now);
    loop.at(now + 0.5, kRankStepEnd, [&](double t) { ran.push_back(t); });  // 1.5: inside the window
    loop.at(now + 5.0, kRankStepEnd, [&](double t) { ran.push_back(t); });  // 6.0: beyond it
  });
  loop.run_until(2.0);
  CHECK(ran == std::vector<double>{1.0, 1.5});
  CHECK(loop.now() == 2.0);
  CHECK_FALSE(loop.empty());
  loop.run();
  CHECK(ran == std::vector<double>{1.0, 1.5, 6.0});
  CHECK(loop.now() == 6.0);
  CHECK(loop.num_processed() == 3);
}

TEST_CASE("run_until on an empty loop sets now to t", "[event_loop]") {
  EventLoop loop;
  loop.run_until(7.25);
  CHECK(loop.now() == 7.25);
  CHECK(loop.num_processed() == 0);
  CHECK(loop.empty());
}

TEST_CASE("the lookahead names the owners of the next two events, and changes no order", "[event_loop][property]") {
  // Owned events (owners 0..9) and unowned ones (-1) at random times with many
  // ties; before each event runs, the hook must name the owners of the events
  // that actually run after it and after that (-1: none left, or not owned).
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    for (bool with_hook : {false, true}) {
      Rng draw(seed);
      EventLoop loop;
      std::vector<int> ran;                       // owners, in the order the events ran
      std::vector<std::pair<int, int>> told;      // (next, after) the hook gave before each
      std::vector<int> labels_ran;
      for (int i = 0; i < 300; ++i) {
        const double time = static_cast<double>(draw.below(30)) * 0.5;
        const int rank = static_cast<int>(draw.below(5));
        const int owner = draw.below(4) == 0 ? -1 : static_cast<int>(draw.below(10));
        auto handler = [&ran, &labels_ran, owner, i](double) {
          ran.push_back(owner);
          labels_ran.push_back(i);
        };
        if (owner < 0)
          loop.at(time, rank, handler);
        else
          loop.at_owned(time, rank, owner, 0, handler);
      }
      struct Context {
        std::vector<std::pair<int, int>>* told;
      } context{&told};
      if (with_hook)
        loop.set_lookahead(
            [](void* c, int next, int after) { static_cast<Context*>(c)->told->emplace_back(next, after); }, &context);
      loop.run();
      REQUIRE(ran.size() == 300);
      if (!with_hook) {
        CHECK(told.empty());
        continue;
      }
      REQUIRE(told.size() == ran.size());
      for (size_t k = 0; k < ran.size(); ++k) {
        CHECK(told[k].first == (k + 1 < ran.size() ? ran[k + 1] : -1));
        CHECK(told[k].second == (k + 2 < ran.size() ? ran[k + 2] : -1));
      }
    }
  }
}

TEST_CASE("with a lookahead, events run in the same order as without", "[event_loop]") {
  auto run = [](bool hook) {
    Rng draw(7);
    EventLoop loop;
    std::vector<int> order;
    for (int i = 0; i < 200; ++i) {
      const double time = static_cast<double>(draw.below(10)) * 0.25;
      const int owner = static_cast<int>(draw.below(5));
      loop.at_owned(time, static_cast<int>(draw.below(5)), owner, 0, [&order, &loop, i, owner](double now) {
        order.push_back(i);
        // Handlers schedule more (the hint may then be wrong; the order may not change).
        if (i % 3 == 0) loop.at_owned(now, kRankStepStart, owner, 0, [&order, i](double) { order.push_back(1000 + i); });
      });
    }
    int calls = 0;
    if (hook) loop.set_lookahead([](void* c, int, int) { ++*static_cast<int*>(c); }, &calls);
    loop.run();
    return std::make_pair(order, calls);
  };
  const auto [plain, no_calls] = run(false);
  const auto [hooked, calls] = run(true);
  CHECK(no_calls == 0);
  CHECK(calls == static_cast<int>(hooked.size()));
  CHECK(plain == hooked);
}

TEST_CASE("handlers scheduling handlers and events taken out keep the order, and release what they hold", "[event_loop][property]") {
  // The loop keeps handlers in slots reused as events run or are taken out.
  // Random events, each of which may schedule more (some at its own time),
  // some taken out unrun: every event that leaves the loop, run or taken,
  // must be the smallest (time, rank, insertion) key still pending, and every
  // handler's captures must be released once it ran or was taken.
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Rng draw(seed);
    EventLoop loop;
    auto token = std::make_shared<int>(0);  // captured by every handler: counts the live ones
    std::set<std::tuple<double, int, int>> pending;  // (time, rank, label = insertion number)
    std::map<int, std::tuple<double, int, int>> key_of;
    int next_label = 0, num_ran = 0, num_taken = 0, num_wrong = 0;
    auto leaves = [&](int label) {
      if (pending.empty() || *pending.begin() != key_of.at(label)) ++num_wrong;
      pending.erase(key_of.at(label));
    };
    std::function<void(double, int, int)> schedule = [&](double time, int rank, int depth) {
      const int label = next_label++;
      key_of[label] = {time, rank, label};
      pending.insert(key_of[label]);
      loop.at_owned(time, rank, label % 7, 0, [&, label, depth, token](double now) {
        leaves(label);
        ++num_ran;
        if (depth < 3 && draw.below(2) == 0)
          for (int k = 0; k < 2; ++k)
            schedule(now + static_cast<double>(draw.below(3)) * 0.5, static_cast<int>(draw.below(5)), depth + 1);
      });
    };
    for (int i = 0; i < 200; ++i) schedule(static_cast<double>(draw.below(40)) * 0.5, static_cast<int>(draw.below(5)), 0);
    while (!loop.empty()) {
      if (draw.below(5) == 0) {
        const EventLoop::Owned o = loop.take_owned();  // its seq is its label: one number per at_owned
        leaves(static_cast<int>(o.seq));
        ++num_taken;
        loop.skipped();
      } else {
        loop.step();
      }
    }
    CHECK(num_wrong == 0);
    CHECK(pending.empty());
    CHECK(num_ran > 200);  // handlers did schedule more
    CHECK(num_taken > 0);
    CHECK(num_ran + num_taken == next_label);
    CHECK(token.use_count() == 1);  // no handler left holding its captures
    CHECK(loop.num_processed() == next_label);
  }
}
