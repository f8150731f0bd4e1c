#include "sim/event_loop.h"

#include <stdexcept>

namespace testbed {

void EventLoop::at(double time, int rank, Handler handler) {
  if (time < now_) throw std::logic_error("EventLoop: an event was scheduled in the past");
  queue_.push(Event{time, rank, -1, 0, next_seq_++, std::move(handler)});
}

void EventLoop::at_owned(double time, int rank, int owner, uint32_t tag, Handler handler) {
  at_owned_seq(time, rank, next_seq_++, owner, tag, std::move(handler));
}

void EventLoop::at_owned_seq(double time, int rank, uint64_t seq, int owner, uint32_t tag, Handler handler) {
  if (time < now_) throw std::logic_error("EventLoop: an event was scheduled in the past");
  if (owner < 0 || seq >= next_seq_) throw std::logic_error("EventLoop: an owned event needs an owner and a taken number");
  queue_.push(Event{time, rank, owner, tag, seq, std::move(handler)});
}

EventLoop::Owned EventLoop::take_owned() {
  if (!next_is_owned()) throw std::logic_error("EventLoop::take_owned: the next event has no owner");
  const Event& ev = queue_.top();
  const Owned o{ev.time, ev.rank, ev.seq, ev.owner, ev.tag};
  queue_.pop();
  return o;
}

bool EventLoop::peek(double& time, int& rank) const {
  if (queue_.empty()) return false;
  time = queue_.top().time;
  rank = queue_.top().rank;
  return true;
}

void EventLoop::replayed(double time) {
  if (time < now_) throw std::logic_error("EventLoop: a replayed event ran in the past");
  now_ = time;
  ++num_processed_;
}

bool EventLoop::step() {
  if (queue_.empty()) return false;
  // Moving out of top() is safe: the element is popped right after.
  Event ev = std::move(const_cast<Event&>(queue_.top()));
  queue_.pop();
  // Never backwards: one thread's loop is monotone anyway; a fleet on several
  // threads runs late KV events (inserted by a window's replay) after later
  // step ends, and its clock must end where one thread's does.
  if (ev.time > now_) now_ = ev.time;
  ++num_processed_;
  if (lookahead_) {
    const std::vector<Event>& h = queue_.heap();
    const int next = h.empty() ? -1 : h[0].owner;
    // The one after the next is the earlier of the root's children.
    int after = -1;
    if (h.size() == 2)
      after = h[1].owner;
    else if (h.size() > 2)
      after = Later()(h[2], h[1]) ? h[1].owner : h[2].owner;
    lookahead_(lookahead_context_, next, after);
  }
  ev.handler(ev.time);
  return true;
}

void EventLoop::run_until(double t) {
  while (!queue_.empty() && queue_.top().time <= t) step();
  if (t > now_) now_ = t;
}

void EventLoop::run() {
  while (step()) {
  }
}

}  // namespace testbed
