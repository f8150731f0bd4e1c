#include "engine/sequence.h"

#include <algorithm>
#include <limits>

#include "engine/block_hash.h"

namespace testbed {

double Sequence::cancel_deadline_s() const {
  return request_.cancel_after_s >= 0 ? client_arrival_s() + request_.cancel_after_s
                                      : std::numeric_limits<double>::infinity();
}

Sequence::Sequence(Request request) : request_(std::move(request)) {
  tokens_ = std::move(request_.prompt);
  request_.prompt.clear();
  num_prompt_tokens_ = static_cast<int>(tokens_.size());
  id_ = request_.id;
  max_output_tokens_ = request_.max_output_tokens;
  has_scripted_output_ = !request_.scripted_output.empty();
  cancel_after_tokens_ = request_.cancel_after_tokens;
  tokens_.reserve(tokens_.size() + std::max(request_.max_output_tokens, 0));
  if (request_.prompt_hash_block_size > 0) {  // hashed upstream: adopt, don't recompute
    block_hashes_ = std::move(request_.prompt_block_hashes);
    hashed_block_size_ = request_.prompt_hash_block_size;
    request_.prompt_block_hashes.clear();
  }
}

const std::vector<uint64_t>& Sequence::extend_block_hashes(int block_size) {
  if (hashed_block_size_ != block_size) {
    block_hashes_.clear();
    hashed_block_size_ = block_size;
  }
  // Room for every block the sequence can fill, prompt and output, at once:
  // grown by push_back, a prompt's hashes were copied several times over.
  const size_t most = static_cast<size_t>(num_prompt_tokens_ + std::max(max_output_tokens_, 0)) / block_size;
  if (block_hashes_.capacity() < most) block_hashes_.reserve(most);
  testbed::extend_block_hashes(block_hashes_, tokens_, block_size, request_.cache_salt);
  return block_hashes_;
}

}  // namespace testbed
