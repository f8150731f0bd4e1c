#include "engine/read_ahead_source.h"

#include <utility>

#include "engine/block_hash.h"

namespace testbed {

ReadAheadSource::ReadAheadSource(std::unique_ptr<RequestSource> inner, size_t depth, int hash_block_size,
                                 Producer producer)
    : inner_(std::move(inner)),
      depth_(depth < 1 ? 1 : depth),
      hash_block_size_(hash_block_size),
      size_hint_(inner_->size_hint()),
      producer_kind_(producer) {
  if (producer_kind_ == Producer::Thread) producer_ = std::thread([this] { produce(); });
}

ReadAheadSource::~ReadAheadSource() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  room_.notify_all();
  if (producer_.joinable()) producer_.join();
}

bool ReadAheadSource::produce_one() {
  try {
    std::optional<Request> r = inner_->next();
    if (r) {
      if (hash_block_size_ > 0) hash_prompt(*r, hash_block_size_);
      bool was_empty;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        was_empty = queue_.empty();
        queue_.push_back(std::move(*r));
        num_queued_.store(queue_.size(), std::memory_order_relaxed);
      }
      if (was_empty) ready_.notify_one();
      return true;
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  ready_.notify_one();
  return false;
}

void ReadAheadSource::produce() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      room_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
      if (stop_) {
        done_ = true;
        return;
      }
    }
    if (!produce_one()) return;
  }
}

bool ReadAheadSource::work_ahead() {
  if (producer_kind_ != Producer::Idle) return false;
  // A hint, checked again under the lock: a full queue or a finished source
  // is answered without touching either mutex.
  if (done_.load(std::memory_order_relaxed) || num_queued_.load(std::memory_order_relaxed) >= depth_) return false;
  std::unique_lock<std::mutex> producing(produce_mutex_, std::try_to_lock);
  if (!producing.owns_lock()) return false;  // another thread is generating
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_ || queue_.size() >= depth_) return false;
  }
  return produce_one();
}

std::optional<Request> ReadAheadSource::next() {
  if (taken_.empty()) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (producer_kind_ == Producer::Idle && queue_.empty() && !done_) {
      // Nothing ready: generate it here, after any request a helper is generating now.
      lock.unlock();
      {
        std::lock_guard<std::mutex> producing(produce_mutex_);
        bool empty;
        {
          std::lock_guard<std::mutex> check(mutex_);
          empty = queue_.empty() && !done_;
        }
        if (empty) produce_one();  // a request or the end: either way the wait below returns
      }
      lock.lock();
    }
    ready_.wait(lock, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) {  // the producer stopped and everything before it was delivered
      if (error_) std::rethrow_exception(error_);
      return std::nullopt;
    }
    taken_.swap(queue_);  // the whole batch under one lock
    num_queued_.store(0, std::memory_order_relaxed);
    lock.unlock();
    room_.notify_one();
  }
  Request r = std::move(taken_.front());
  taken_.pop_front();
  return r;
}

}  // namespace testbed
