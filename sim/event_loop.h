// A deterministic discrete-event core (in the spirit of simcpp20 / SimGrid):
// events run in (time, rank, sequence number) order. The rank orders event
// classes at equal times (arrivals before scheduling, as Vidur does); the
// sequence number breaks the remaining ties in insertion order, so a given seed
// always replays the same history.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace testbed {

// Event classes, in the order they run at equal times.
enum EventRank : int {
  kRankArrival = 0,     // a request reaches the ingress / an instance
  kRankTransfer = 1,    // a KV transfer or routing decision lands
  kRankStepEnd = 2,     // an instance finishes a step
  kRankStepStart = 3,   // an idle instance looks for work
  kRankControl = 4,     // autoscaling, sampling of signals
};

class EventLoop {
 public:
  using Handler = std::function<void(double now)>;

  void at(double time, int rank, Handler handler);
  double now() const { return now_; }
  bool empty() const { return queue_.empty(); }
  int64_t num_processed() const { return num_processed_; }
  // Runs the next event; false when none is left.
  bool step();
  // Runs every event with time <= t, then sets now to t.
  void run_until(double t);
  void run();

 private:
  struct Event {
    double time;
    int rank;
    uint64_t seq;
    Handler handler;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      if (a.rank != b.rank) return a.rank > b.rank;
      return a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  double now_ = 0.0;
  uint64_t next_seq_ = 0;
  int64_t num_processed_ = 0;
};

}  // namespace testbed
