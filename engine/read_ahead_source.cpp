#include "engine/read_ahead_source.h"

#include <utility>

#include "engine/block_hash.h"

namespace testbed {

ReadAheadSource::ReadAheadSource(std::unique_ptr<RequestSource> inner, size_t depth, int hash_block_size)
    : inner_(std::move(inner)),
      depth_(depth < 1 ? 1 : depth),
      hash_block_size_(hash_block_size),
      size_hint_(inner_->size_hint()),
      producer_([this] { produce(); }) {}

ReadAheadSource::~ReadAheadSource() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  room_.notify_all();
  producer_.join();
}

void ReadAheadSource::produce() {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        room_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
        if (stop_) break;
      }
      std::optional<Request> r = inner_->next();
      if (!r) break;
      if (hash_block_size_ > 0 && r->prompt_hash_block_size != hash_block_size_) {
        r->prompt_block_hashes.clear();
        extend_block_hashes(r->prompt_block_hashes, r->prompt, hash_block_size_, r->cache_salt);
        r->prompt_hash_block_size = hash_block_size_;
      }
      bool was_empty;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        was_empty = queue_.empty();
        queue_.push_back(std::move(*r));
      }
      if (was_empty) ready_.notify_one();
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
}

std::optional<Request> ReadAheadSource::next() {
  if (taken_.empty()) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) {  // the producer stopped and everything before it was delivered
      if (error_) std::rethrow_exception(error_);
      return std::nullopt;
    }
    taken_.swap(queue_);  // the whole batch under one lock
    lock.unlock();
    room_.notify_one();
  }
  Request r = std::move(taken_.front());
  taken_.pop_front();
  return r;
}

}  // namespace testbed
