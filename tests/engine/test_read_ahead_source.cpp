// ReadAheadSource: the requests of the wrapped source, in order, whatever the
// depth and whoever generates them (its own thread, helpers calling
// work_ahead, or next() itself); prompts hashed as the engine would; an error
// reaches the consumer after every request before it; and it stops cleanly
// when dropped early.
#include <atomic>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>

#include "engine/block_hash.h"
#include "engine/common/rng.h"
#include "engine/read_ahead_source.h"

using namespace testbed;

namespace {

// Requests 0..n-1 with seeded prompts; throws at request `fail_at` (-1: never).
class CountingSource : public RequestSource {
 public:
  CountingSource(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  std::optional<Request> next() override {
    if (next_ == fail_at_) throw std::runtime_error("row " + std::to_string(next_) + " is bad");
    if (next_ >= n_) return std::nullopt;
    Request r;
    r.id = next_;
    r.arrival_s = 0.25 * static_cast<double>(next_);
    Rng rng(static_cast<uint64_t>(next_) + 1);
    const int len = 1 + static_cast<int>(rng.below(100));
    for (int i = 0; i < len; ++i) r.prompt.push_back(static_cast<int32_t>(rng.below(1000)));
    r.cache_salt = static_cast<uint64_t>(next_ % 3);
    ++next_;
    return r;
  }
  int64_t size_hint() const override { return n_; }

 private:
  int64_t n_, fail_at_, next_ = 0;
};

// Threads calling work_ahead() until stopped, as a fleet's idle workers do.
class Helpers {
 public:
  Helpers(RequestSource& source, int n) {
    for (int k = 0; k < n; ++k)
      threads_.emplace_back([this, &source] {
        while (!stop_.load()) {
          if (source.work_ahead()) done_.fetch_add(1);
          else std::this_thread::yield();
        }
      });
  }
  ~Helpers() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
  }
  int64_t done() const { return done_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> done_{0};
  std::vector<std::thread> threads_;
};

// The three ways requests get made: a producer thread; Producer::Idle with
// `helpers` threads calling work_ahead (0: next() makes every one).
struct Way {
  ReadAheadSource::Producer producer;
  int helpers;
};
const Way kWays[] = {{ReadAheadSource::Producer::Thread, 0}, {ReadAheadSource::Producer::Idle, 0},
                     {ReadAheadSource::Producer::Idle, 1}, {ReadAheadSource::Producer::Idle, 3}};

}  // namespace

TEST_CASE("read-ahead gives the wrapped source's requests in order with their block hashes", "[engine][read_ahead]") {
  for (const Way way : kWays)
  for (const size_t depth : {size_t{1}, size_t{3}, size_t{64}, size_t{100000}}) {
    INFO("depth " << depth << ", idle producer " << (way.producer == ReadAheadSource::Producer::Idle)
                  << ", helpers " << way.helpers);
    CountingSource plain(5000);
    ReadAheadSource ahead(std::make_unique<CountingSource>(5000), depth, 16, way.producer);
    Helpers helpers(ahead, way.helpers);
    CHECK(ahead.size_hint() == 5000);
    int64_t n = 0;
    while (auto r = ahead.next()) {
      const auto expected = plain.next();
      REQUIRE(expected);
      CHECK(r->id == expected->id);
      CHECK(r->arrival_s == expected->arrival_s);
      CHECK(r->prompt == expected->prompt);
      std::vector<uint64_t> hashes;
      extend_block_hashes(hashes, expected->prompt, 16, expected->cache_salt);
      CHECK(r->prompt_hash_block_size == 16);
      CHECK(r->prompt_block_hashes == hashes);
      ++n;
    }
    CHECK(n == 5000);
    CHECK_FALSE(plain.next());
    CHECK_FALSE(ahead.next());  // exhausted stays exhausted
  }
}

TEST_CASE("read-ahead without a block size leaves prompts unhashed", "[engine][read_ahead]") {
  ReadAheadSource ahead(std::make_unique<CountingSource>(10), 4, 0);
  while (auto r = ahead.next()) {
    CHECK(r->prompt_hash_block_size == 0);
    CHECK(r->prompt_block_hashes.empty());
  }
}

TEST_CASE("an idle producer generates only while there is room, and only when asked", "[engine][read_ahead]") {
  ReadAheadSource thread(std::make_unique<CountingSource>(10), 3, 16);
  CHECK_FALSE(thread.work_ahead());  // its own thread generates
  ReadAheadSource idle(std::make_unique<CountingSource>(5), 3, 16, ReadAheadSource::Producer::Idle);
  CHECK(idle.work_ahead());
  CHECK(idle.work_ahead());
  CHECK(idle.work_ahead());
  CHECK_FALSE(idle.work_ahead());  // three ahead: full
  REQUIRE(idle.next());            // takes the three
  CHECK(idle.work_ahead());        // request 3
  CHECK(idle.work_ahead());        // request 4
  CHECK_FALSE(idle.work_ahead());  // exhausted
  for (int64_t id = 1; id < 5; ++id) {
    auto r = idle.next();
    REQUIRE(r);
    CHECK(r->id == id);
  }
  CHECK_FALSE(idle.next());
}

TEST_CASE("read-ahead delivers an error after every request before it", "[engine][read_ahead]") {
  for (const Way way : kWays) {
  INFO("idle producer " << (way.producer == ReadAheadSource::Producer::Idle) << ", helpers " << way.helpers);
  ReadAheadSource ahead(std::make_unique<CountingSource>(100, 37), 8, 16, way.producer);
  Helpers helpers(ahead, way.helpers);
  int64_t n = 0;
  try {
    while (auto r = ahead.next()) {
      CHECK(r->id == n);
      ++n;
    }
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "row 37 is bad");
  }
  CHECK(n == 37);
  CHECK_FALSE(ahead.work_ahead());  // it failed: nothing more is generated
  }
}

TEST_CASE("read-ahead dropped before the end stops its thread", "[engine][read_ahead]") {
  for (int k = 0; k < 20; ++k) {
    ReadAheadSource ahead(std::make_unique<CountingSource>(1000000), 16, 16);
    for (int i = 0; i < k; ++i) REQUIRE(ahead.next());
  }  // each destructor joins a producer blocked on a full queue
  SUCCEED();
}

TEST_CASE("an idle producer's helpers fill the queue ahead of the consumer", "[engine][read_ahead]") {
  ReadAheadSource ahead(std::make_unique<CountingSource>(1000), 1000, 16, ReadAheadSource::Producer::Idle);
  {
    Helpers helpers(ahead, 2);
    while (helpers.done() < 1000) std::this_thread::yield();
  }
  int64_t n = 0;
  while (auto r = ahead.next()) CHECK(r->id == n++);
  CHECK(n == 1000);
}
