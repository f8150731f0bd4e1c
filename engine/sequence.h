// Sequence: a request as the engine tracks it. Tokens are prompt + output so far;
// num_computed_tokens of them have their K/V in the cache. A step computes the
// next chunk; when every known token is computed the step samples a new one.
// Proposed (draft) tokens wait beside the known ones until a step verifies them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"

namespace testbed {

enum class SeqStatus : uint8_t {
  Waiting,    // queued (new, or preempted)
  Running,    // holds blocks, scheduled every step
  Importing,  // its KV is arriving from another engine (hand-off)
  Finished,
  HandedOff,  // left this engine after its prefill (its blocks stay until the transfer ends)
  Cancelled,  // its client disconnected (Request::cancel_after_s / cancel_after_tokens): blocks freed at once
};

class alignas(64) Sequence {
 public:
  explicit Sequence(Request request);

  const Request& request() const { return request_; }
  int64_t id() const { return id_; }
  double arrival_s() const { return request_.arrival_s; }  // at the engine
  double client_arrival_s() const { return request_.arrival_s - request_.frontend_s; }
  // When the client disconnects (Request::cancel_after_s after it sent the request); +inf: never.
  double cancel_deadline_s() const;
  int priority() const { return request_.priority; }

  int num_tokens() const { return num_prompt_tokens_ + num_output_tokens_; }
  int num_prompt_tokens() const { return num_prompt_tokens_; }
  int num_output_tokens() const { return num_output_tokens_; }
  int max_output_tokens() const { return max_output_tokens_; }
  bool has_scripted_output() const { return has_scripted_output_; }
  // Request::cancel_after_tokens, kept beside the counts it is compared with
  // every step (the request's own copy is several cache lines further on).
  int cancel_after_tokens() const { return cancel_after_tokens_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  void append_token(int32_t token) {
    tokens_.push_back(token);
    ++num_output_tokens_;
  }
  // Whether every known token but the last is in the cache, past the prompt.
  bool is_decoding() const {
    return num_computed_tokens == num_tokens() - 1 && num_computed_tokens >= num_prompt_tokens_;
  }

  // Proposed tokens that follow tokens(), waiting to be verified by a step.
  int num_draft_tokens() const { return num_drafts_; }
  const std::vector<int32_t>& draft_tokens() const { return drafts_; }
  void set_draft_tokens(const int32_t* t, int n) {
    drafts_.assign(t, t + n);
    num_drafts_ = n;
  }
  void truncate_draft_tokens(int n) {
    if (n < num_drafts_) {
      drafts_.resize(n);
      num_drafts_ = n;
    }
  }

  // Hashes of every full block of tokens(), extended lazily. Inline fast
  // path: most calls find them complete (and must not read the request's
  // cache salt, a cold cache line, to learn it).
  const std::vector<uint64_t>& block_hashes(int block_size) {
    if (hashed_block_size_ == block_size &&
        block_hashes_.size() == tokens_.size() / static_cast<size_t>(block_size))
      return block_hashes_;
    return extend_block_hashes(block_size);
  }
  // The hashes block_hashes last computed (none extended now).
  const std::vector<uint64_t>& known_block_hashes() const { return block_hashes_; }

  // Where block_hashes(block_size) puts the hash of block i once it is full
  // (for loading it ahead; the slot may be past the end yet).
  const uint64_t* block_hash_slot(int i) const { return block_hashes_.data() + i; }

  // Members in the order a decode step touches them: every step reads the
  // first two cache lines of each running sequence (aligned to a line, so
  // prefetch_sequence loads exactly them), so they hold everything that step
  // needs, the block hashes' vector included (a step that fills a block
  // commits it); the request itself (prompt metadata, sampling) comes after.
 private:
  std::vector<int32_t> tokens_;
  int64_t id_ = 0;
  int num_prompt_tokens_ = 0;
  int num_output_tokens_ = 0;
  int max_output_tokens_ = 0;
  int num_drafts_ = 0;
  int cancel_after_tokens_ = 0;
  bool has_scripted_output_ = false;

 public:
  SeqStatus status = SeqStatus::Waiting;
  int num_computed_tokens = 0;
  int num_committed_blocks = 0;      // leading blocks already offered to the prefix cache
  std::vector<int32_t> block_table;  // physical block ids, logical order

 private:
  std::vector<uint64_t> block_hashes_;
  int hashed_block_size_ = 0;

 public:
  double last_token_s = -1.0;
  // The second cache line ends here.
  double first_token_s = -1.0;
  int num_cached_tokens = -1;  // prefix-cache hit at first admission; -1 before
  int num_preemptions = 0;
  double finish_s = -1.0;
  // Prefill/decode disaggregation, filled by whoever moves the sequence (the
  // fleet, the two-engine driver): where its prefill ran, when it was ready to
  // leave (its first token), when its KV transfer started and ended (the
  // wait between ready and start is back-pressure), and what moved.
  struct HandOffLog {
    int prefill_instance = -1;  // -1: never handed off
    double ready_s = -1.0, transfer_start_s = -1.0, transfer_end_s = -1.0;
    int64_t transfer_bytes = 0;
    int transfer_blocks = 0, reused_blocks = 0;  // blocks copied / found in the receiver's prefix cache
  } handoff;
  // Speculative decoding: proposed tokens verified, and of those accepted.
  int spec_drafted = 0, spec_accepted = 0, spec_steps = 0;  // spec_steps: steps that verified drafts

 private:
  Request request_;
  std::vector<int32_t> drafts_;

  const std::vector<uint64_t>& extend_block_hashes(int block_size);
};
static_assert(alignof(Sequence) == 64, "prefetch_sequence loads a sequence's first two cache lines");

// Starts loading the first two cache lines of `s`, all a decode step reads and
// writes of it. A fleet runs other instances' steps between two of this
// instance's, so a batch's sequences are out of the cache when its loops start.
inline void prefetch_sequence(const Sequence* s) {
  __builtin_prefetch(s, 1);
  __builtin_prefetch(reinterpret_cast<const char*>(s) + 64, 1);
}

}  // namespace testbed
