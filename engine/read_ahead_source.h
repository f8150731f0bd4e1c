// ReadAheadSource: requests generated ahead of one simulation. A producer pulls
// the wrapped source up to `depth` requests ahead of the consumer and hashes
// each prompt's blocks (the engines' chained hashes at `hash_block_size`, 0:
// none), so the simulation's thread finds requests generated and hashed
// (Request::prompt_block_hashes, which routers and sequences adopt).
//
// The producer is either a thread of its own (Producer::Thread) or whoever
// calls work_ahead() (Producer::Idle: a multi-threaded fleet's workers while
// they wait for a window, so that a third thread does not time-slice with the
// fleet's two on two cores); in that mode next() generates a request itself
// when none is ready.
//
// Deterministic by construction: the wrapped source is pulled by one thread
// at a time, in order, and nothing it produces depends on the simulation's state, so the
// consumer sees the same requests in the same order as without read-ahead,
// and the hashes are the ones the fleet or the sequence would compute. An
// exception thrown by the wrapped source (a bad trace row) reaches the
// consumer at the request where it happened, after every request before it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/request_source.h"

namespace testbed {

class ReadAheadSource : public RequestSource {
 public:
  enum class Producer { Thread, Idle };
  ReadAheadSource(std::unique_ptr<RequestSource> inner, size_t depth, int hash_block_size,
                  Producer producer = Producer::Thread);
  ~ReadAheadSource() override;  // stops the producer thread and joins it
  ReadAheadSource(const ReadAheadSource&) = delete;
  ReadAheadSource& operator=(const ReadAheadSource&) = delete;

  std::optional<Request> next() override;
  int64_t size_hint() const override { return size_hint_; }
  // Producer::Idle: generates one request when there is room and no other
  // thread is generating; false otherwise (and always with a thread of its own).
  bool work_ahead() override;

 private:
  void produce();
  // Pulls and hashes one request into the queue; false when the source is done
  // (exhausted or failed). The caller holds produce_mutex_.
  bool produce_one();

  std::unique_ptr<RequestSource> inner_;
  const size_t depth_;
  const int hash_block_size_;
  const int64_t size_hint_;
  const Producer producer_kind_;
  std::mutex produce_mutex_;  // Producer::Idle: one thread pulls inner_ at a time
  std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::deque<Request> queue_;        // produced, not yet taken
  // The producer has stopped (exhausted or failed). Written under mutex_; an
  // atomic, as is queue_'s size below, so work_ahead can read both without
  // the lock: a fleet's idle worker asks every few hundred cycles, and
  // locking mutex_ each time kept its cache line moving between the worker's
  // core and the consumer's (the lock calls were 3% of a fleet_1k.ini
  // slice's samples; README, Fleet scale).
  std::atomic<bool> done_{false};
  std::atomic<size_t> num_queued_{0};  // queue_.size(), kept for that read
  std::exception_ptr error_;         // what stopped it, delivered after the queue
  bool stop_ = false;                // the consumer is going away
  std::deque<Request> taken_;        // the consumer's batch, taken under one lock
  std::thread producer_;              // Producer::Thread only
};

}  // namespace testbed
