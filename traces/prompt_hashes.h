// Prompt block hashes computed where the prompt is built, each shared part
// once. The engines' prefix caches and the routers key a prompt's blocks by
// chained hashes (engine/block_hash.h): block b's hash depends only on blocks
// 0..b, so a system prompt many requests begin with, or a conversation's
// history that the next turn extends, has the same leading hashes in every
// prompt built from it. A generator that knows its prompt's parts hands the
// request its hashes (Request.prompt_block_hashes at
// WorkloadContext.hash_block_size), and whoever reads the request adopts
// them instead of hashing the whole prompt again: the read-ahead, the fleet's
// router, the engine's sequence. The same hashes, so the same results.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/block_hash.h"
#include "engine/request.h"

namespace testbed {

class PromptHashes {
 public:
  // block_size 0: nothing is hashed (no reader would use the hashes).
  explicit PromptHashes(int block_size) : block_size_(block_size) {}
  bool enabled() const { return block_size_ > 0; }

  // The hashes of `part`'s full blocks (cache salt 0), computed the first
  // time part `index` is asked for: parts are fixed once built.
  const std::vector<uint64_t>& part(size_t index, const std::vector<int32_t>& tokens) {
    if (index >= parts_.size()) parts_.resize(index + 1);
    Part& p = parts_[index];
    if (!p.done) {
      extend_block_hashes(p.hashes, tokens, block_size_, 0);
      p.done = true;
    }
    return p.hashes;
  }

  // r's prompt hashes: the first `known` of `leading` (unsalted hashes of
  // the blocks r.prompt begins with; none of them for a salted request), then
  // the rest hashed from r.prompt.
  void finish(Request& r, const std::vector<uint64_t>& leading, size_t known) const {
    if (!enabled()) return;
    known = r.cache_salt != 0 ? 0 : std::min(known, leading.size());
    // Room for every block the prompt's vector has room for: a generator
    // reserves the output's tokens there, whose blocks the engine hashes later.
    r.prompt_block_hashes.reserve(r.prompt.capacity() / static_cast<size_t>(block_size_));
    r.prompt_block_hashes.assign(leading.begin(), leading.begin() + static_cast<std::ptrdiff_t>(known));
    hash_rest(r);
  }
  // The same with all of `leading`, taken over.
  void finish(Request& r, std::vector<uint64_t>&& leading) const {
    if (!enabled()) return;
    if (r.cache_salt != 0) leading.clear();
    r.prompt_block_hashes = std::move(leading);
    hash_rest(r);
  }
  // How many of a prefix's leading hashes hold for a prompt whose first
  // `shared` tokens are that prefix's.
  size_t blocks_of(int64_t shared) const { return static_cast<size_t>(shared / block_size_); }
  int block_size() const { return block_size_; }

 private:
  void hash_rest(Request& r) const {
    extend_block_hashes(r.prompt_block_hashes, r.prompt, block_size_, r.cache_salt);
    r.prompt_hash_block_size = block_size_;
  }
  struct Part {
    bool done = false;
    std::vector<uint64_t> hashes;
  };
  int block_size_;
  std::vector<Part> parts_;
};

}  // namespace testbed
