// What one engine step runs (the scheduler's output, the executor's input) and
// what the executor returns.
//
// A batch item computes positions [num_computed, num_computed + num_new) of one
// sequence. The last num_draft of them are proposed (draft) tokens to verify:
// positions at and beyond the sequence's known tokens, whose inputs are the
// drafts. An item that computes the sequence's last known token samples: from
// the logits of that position, and of every draft position after it (the
// verified positions), it returns between 1 and num_draft + 1 tokens to append:
// the accepted drafts, then the target's own token at the first rejection (or
// a bonus token when every draft was accepted).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sequence.h"

namespace testbed {

struct ScheduledSeq {
  ScheduledSeq() = default;
  // Classifies the item from the sequence's state at scheduling time.
  ScheduledSeq(Sequence* s, int computed, int new_tokens, int drafts = 0)
      : seq(s), num_computed(computed), num_new(new_tokens), num_draft(drafts) {
    samples_ = computed + new_tokens - drafts == s->num_tokens();
    // Decoding: every known token but the last is in the cache, past the prompt
    // (a sequence recomputing its output after a preemption is prefilling).
    decode_ = computed == s->num_tokens() - 1 && computed >= s->num_prompt_tokens();
  }

  Sequence* seq = nullptr;
  int num_computed = 0;  // tokens already in the KV cache before this step
  int num_new = 0;       // positions this step computes, drafts included
  int num_draft = 0;     // proposed tokens among them (the last num_draft positions)

  // The step samples for this item: it computes the last known token.
  bool samples() const { return samples_; }
  // A decode item (one known token, maybe drafts); else a prompt chunk or a recompute.
  bool is_decode() const { return decode_; }
  // Positions whose logits are sampled: the last known token and every draft.
  int num_verified() const { return samples_ ? num_draft + 1 : 0; }
  // The input token at `position` (a known token, or a draft beyond them).
  int32_t token_at(int position) const {
    const int known = num_computed + num_new - num_draft;
    return position < known ? seq->tokens()[position] : seq->draft_tokens()[position - known];
  }

 private:
  bool samples_ = false;
  bool decode_ = false;
};

struct Batch {
  std::vector<ScheduledSeq> items;
  std::vector<int64_t> preempted;  // ids preempted while forming this batch
  int num_prefill_tokens = 0;      // positions of prompt chunks and recomputes
  int num_decode_tokens = 0;       // positions of decode items (drafts included)
  bool want_probs = false;         // the executor also returns the probabilities of verified positions

  void add(Sequence* seq, int num_computed, int num_new, int num_draft = 0) {
    items.emplace_back(seq, num_computed, num_new, num_draft);
    (items.back().is_decode() ? num_decode_tokens : num_prefill_tokens) += num_new;
  }
  bool empty() const { return items.empty(); }
  int num_tokens() const { return num_prefill_tokens + num_decode_tokens; }
  int num_seqs() const { return static_cast<int>(items.size()); }
};

// What the executor returns for a batch. Variable-length per item, as CSR:
// item i appends tokens[token_offsets[i] .. token_offsets[i + 1]) (none when it
// does not sample). Optionally, per item, the probabilities the target model
// sampled each verified position from (Batch::want_probs; rows of vocab_size,
// item i's rows from prob_offsets[i]), and tokens proposed for the item's
// next step (a proposer running beside the model; empty when none proposes).
struct StepResult {
  std::vector<int32_t> token_offsets{0};
  std::vector<int32_t> tokens;
  std::vector<int32_t> prob_offsets;  // [num items + 1] rows, when probabilities were asked for
  std::vector<float> probs;           // [rows][vocab_size]
  int vocab_size = 0;
  std::vector<int32_t> draft_offsets;  // [num items + 1] when any draft is proposed
  std::vector<int32_t> drafts;
  double duration_s = 0.0;  // measured (real executors) or predicted (simulated)

  void reserve(size_t num_items) {
    token_offsets.reserve(num_items + 1);
    tokens.reserve(num_items);
  }
  // Closes the next item with the given tokens (none for an item that does not sample).
  void add_item(const int32_t* t, int n) {
    tokens.insert(tokens.end(), t, t + n);
    token_offsets.push_back(static_cast<int32_t>(tokens.size()));
  }
  void add_token(int32_t t) {
    tokens.push_back(t);
    token_offsets.push_back(static_cast<int32_t>(tokens.size()));
  }
  void add_none() { token_offsets.push_back(static_cast<int32_t>(tokens.size())); }
  int num_items() const { return static_cast<int>(token_offsets.size()) - 1; }
  int num_tokens(int item) const { return token_offsets[item + 1] - token_offsets[item]; }
  const int32_t* tokens_of(int item) const { return tokens.data() + token_offsets[item]; }
  int num_drafts(int item) const { return draft_offsets.empty() ? 0 : draft_offsets[item + 1] - draft_offsets[item]; }
  const int32_t* drafts_of(int item) const { return drafts.data() + draft_offsets[item]; }
};

}  // namespace testbed
