// ReadAheadSource: a second thread for one simulation. A producer thread pulls
// the wrapped source up to `depth` requests ahead of the consumer and hashes
// each prompt's blocks (the engines' chained hashes at `hash_block_size`, 0:
// none), so the simulation's thread finds requests generated and hashed
// (Request::prompt_block_hashes, which routers and sequences adopt).
//
// Deterministic by construction: the wrapped source is pulled by one thread,
// in order, and nothing it produces depends on the simulation's state, so the
// consumer sees the same requests in the same order as without read-ahead,
// and the hashes are the ones the fleet or the sequence would compute. An
// exception thrown by the wrapped source (a bad trace row) reaches the
// consumer at the request where it happened, after every request before it.
#pragma once

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
  ReadAheadSource(std::unique_ptr<RequestSource> inner, size_t depth, int hash_block_size);
  ~ReadAheadSource() override;  // stops the producer and joins it
  ReadAheadSource(const ReadAheadSource&) = delete;
  ReadAheadSource& operator=(const ReadAheadSource&) = delete;

  std::optional<Request> next() override;
  int64_t size_hint() const override { return size_hint_; }

 private:
  void produce();

  std::unique_ptr<RequestSource> inner_;
  const size_t depth_;
  const int hash_block_size_;
  const int64_t size_hint_;
  std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::deque<Request> queue_;        // produced, not yet taken
  bool done_ = false;                // the producer has stopped (exhausted or failed)
  std::exception_ptr error_;         // what stopped it, delivered after the queue
  bool stop_ = false;                // the consumer is going away
  std::deque<Request> taken_;        // the consumer's batch, taken under one lock
  std::thread producer_;
};

}  // namespace testbed
