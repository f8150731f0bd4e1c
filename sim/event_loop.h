// A deterministic discrete-event core (in the spirit of simcpp20 / SimGrid):
// events run in (time, rank, sequence number) order. The rank orders event
// classes at equal times (arrivals before scheduling, as Vidur does); the
// sequence number breaks the remaining ties in insertion order, so a given seed
// always replays the same history.
#pragma once

#include <cstdint>
#include <functional>
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
  // An event of one owner (an instance, owner >= 0; tag: what it means to the
  // owner). It runs like any other; a fleet stepping instances on several
  // threads (sim/fleet.h) takes such events out in windows instead (take_owned).
  void at_owned(double time, int rank, int owner, uint32_t tag, Handler handler);
  double now() const { return now_; }
  bool empty() const { return heap_.empty(); }
  // Called by step() before each event runs, with the owners of the event
  // that comes next after it and of the one after that (-1: none, or not
  // owned), so a fleet can start loading their state while this one runs (a
  // large fleet's instance is out of the cache by its next step). The hint
  // may be wrong (this event may schedule one before them); it must change
  // nothing but what is in the cache.
  using Lookahead = void (*)(void* context, int next_owner, int after_owner);
  void set_lookahead(Lookahead f, void* context) {
    lookahead_ = f;
    lookahead_context_ = context;
  }
  int64_t num_processed() const { return num_processed_; }
  // Runs the next event (its handler gets the event's time); false when none is left.
  bool step();
  // Runs every event with time <= t, then sets now to t.
  void run_until(double t);
  void run();

  // Windows of owned events (sim/fleet_windows.cpp). The caller runs what they
  // stand for itself and replays their effects in (time, rank, seq) order,
  // numbering the events they schedule as at() would have (take_seq).
  struct Owned {
    double time;
    int rank;
    uint64_t seq;
    int owner;
    uint32_t tag;
  };
  bool next_is_owned() const { return !heap_.empty() && heap_[0].owner >= 0; }
  // Pops the next event (owned) without running it; replayed() or skipped() counts it.
  Owned take_owned();
  // The loop's order: event a (time, rank, seq) runs after event b.
  static bool runs_after(double ta, int ra, uint64_t sa, double tb, int rb, uint64_t sb) {
    if (ta != tb) return ta > tb;
    if (ra != rb) return ra > rb;
    return sa > sb;
  }
  // The (time, rank) of the next event; false when none is left.
  bool peek(double& time, int& rank) const;
  // The sequence number the next at() would take, taken.
  uint64_t take_seq() { return next_seq_++; }
  // at_owned with a number from take_seq.
  void at_owned_seq(double time, int rank, uint64_t seq, int owner, uint32_t tag, Handler handler);
  // A replayed event ran at `time` (not before now).
  void replayed(double time);
  // A taken event that does nothing ran.
  void skipped() { ++num_processed_; }
  // The clock has reached t (a window's skipped events, after its replay).
  void reached(double t) {
    if (t > now_) now_ = t;
  }

 private:
  // The heap holds small, trivially copied keys; the handlers wait in a slab
  // beside it, moved once in and once out. A heap of events holding their
  // std::function moved each handler at every level a sift passed (a call
  // through its manager each time), about 250 instructions an event.
  struct Key {
    double time;
    int rank;
    int owner;  // -1: none
    uint32_t tag;
    uint32_t slot;  // its handler in handlers_
    uint64_t seq;
  };
  struct Later {
    bool operator()(const Key& a, const Key& b) const {
      return runs_after(a.time, a.rank, a.seq, b.time, b.rank, b.seq);
    }
  };
  void push(const Key& key, Handler&& handler);
  // at_owned and at_owned_seq: checked, and the handler moved on, not copied through.
  void push_owned(double time, int rank, uint64_t seq, int owner, uint32_t tag, Handler&& handler);
  // Removes the next event's key from the heap (not empty) and returns it; its handler stays in its slot.
  Key pop_key();
  Handler take_handler(uint32_t slot);

  std::vector<Key> heap_;  // a binary heap under Later: the next event at heap_[0]
  std::vector<Handler> handlers_;
  std::vector<uint32_t> free_slots_;
  Lookahead lookahead_ = nullptr;
  void* lookahead_context_ = nullptr;
  double now_ = 0.0;
  uint64_t next_seq_ = 0;
  int64_t num_processed_ = 0;
};

}  // namespace testbed
