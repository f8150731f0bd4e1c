#include "sim/event_loop.h"

#include <stdexcept>

namespace testbed {

void EventLoop::at(double time, int rank, Handler handler) {
  if (time < now_) throw std::logic_error("EventLoop: an event was scheduled in the past");
  queue_.push(Event{time, rank, next_seq_++, std::move(handler)});
}

bool EventLoop::step() {
  if (queue_.empty()) return false;
  // Moving out of top() is safe: the element is popped right after.
  Event ev = std::move(const_cast<Event&>(queue_.top()));
  queue_.pop();
  now_ = ev.time;
  ++num_processed_;
  ev.handler(now_);
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
