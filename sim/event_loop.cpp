#include "sim/event_loop.h"

#include <algorithm>
#include <stdexcept>

namespace testbed {

void EventLoop::at(double time, int rank, Handler handler) {
  if (time < now_) throw std::logic_error("EventLoop: an event was scheduled in the past");
  push(Key{time, rank, -1, 0, 0, next_seq_++}, std::move(handler));
}

void EventLoop::at_owned(double time, int rank, int owner, uint32_t tag, Handler handler) {
  push_owned(time, rank, next_seq_++, owner, tag, std::move(handler));
}

void EventLoop::at_owned_seq(double time, int rank, uint64_t seq, int owner, uint32_t tag, Handler handler) {
  push_owned(time, rank, seq, owner, tag, std::move(handler));
}

void EventLoop::push_owned(double time, int rank, uint64_t seq, int owner, uint32_t tag, Handler&& handler) {
  if (time < now_) throw std::logic_error("EventLoop: an event was scheduled in the past");
  if (owner < 0 || seq >= next_seq_) throw std::logic_error("EventLoop: an owned event needs an owner and a taken number");
  push(Key{time, rank, owner, tag, 0, seq}, std::move(handler));
}

void EventLoop::push(const Key& key, Handler&& handler) {
  Key k = key;
  if (free_slots_.empty()) {
    k.slot = static_cast<uint32_t>(handlers_.size());
    handlers_.push_back(std::move(handler));
  } else {
    k.slot = free_slots_.back();
    free_slots_.pop_back();
    handlers_[k.slot] = std::move(handler);
  }
  heap_.push_back(k);
  std::push_heap(heap_.begin(), heap_.end(), Later());
}

EventLoop::Key EventLoop::pop_key() {
  const Key k = heap_[0];
  std::pop_heap(heap_.begin(), heap_.end(), Later());
  heap_.pop_back();
  return k;
}

EventLoop::Handler EventLoop::take_handler(uint32_t slot) {
  Handler h = std::move(handlers_[slot]);
  handlers_[slot] = nullptr;
  free_slots_.push_back(slot);
  return h;
}

EventLoop::Owned EventLoop::take_owned() {
  if (!next_is_owned()) throw std::logic_error("EventLoop::take_owned: the next event has no owner");
  const Key k = pop_key();
  take_handler(k.slot);  // never runs: the caller replays what it stands for
  return Owned{k.time, k.rank, k.seq, k.owner, k.tag};
}

bool EventLoop::peek(double& time, int& rank) const {
  if (heap_.empty()) return false;
  time = heap_[0].time;
  rank = heap_[0].rank;
  return true;
}

void EventLoop::replayed(double time) {
  if (time < now_) throw std::logic_error("EventLoop: a replayed event ran in the past");
  now_ = time;
  ++num_processed_;
}

bool EventLoop::step() {
  if (heap_.empty()) return false;
  const Key ev = pop_key();
  // Out of the slab before it runs: what it schedules may reuse the slot or grow the slab.
  const Handler handler = take_handler(ev.slot);
  // Never backwards: one thread's loop is monotone anyway; a fleet on several
  // threads runs late KV events (inserted by a window's replay) after later
  // step ends, and its clock must end where one thread's does.
  if (ev.time > now_) now_ = ev.time;
  ++num_processed_;
  if (lookahead_) {
    const std::vector<Key>& h = heap_;
    const int next = h.empty() ? -1 : h[0].owner;
    // The one after the next is the earlier of the root's children.
    int after = -1;
    if (h.size() == 2)
      after = h[1].owner;
    else if (h.size() > 2)
      after = Later()(h[2], h[1]) ? h[1].owner : h[2].owner;
    lookahead_(lookahead_context_, next, after);
  }
  handler(ev.time);
  return true;
}

void EventLoop::run_until(double t) {
  while (!heap_.empty() && heap_[0].time <= t) step();
  if (t > now_) now_ = t;
}

void EventLoop::run() {
  while (step()) {
  }
}

}  // namespace testbed
