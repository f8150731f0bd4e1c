// Speculative decoding's proposers (spec.method), run beside the model: after
// a step samples a sequence's next token, a proposer drafts up to k tokens to
// follow it, and the next step verifies them (spec.verify):
//
//   match      a draft is kept while it equals the target's own seeded draw at
//              its position: outputs are token for token those without
//              proposals (greedy verification for greedy requests)
//   rejection  Leviathan et al.'s rejection sampling (kernels/spec/verify_ref.h):
//              draft x, drawn from the proposer's q, is kept with probability
//              min(1, p(x) / q(x)); outputs follow the target's distribution
//              (not its exact draws), and a draft model that samples from q
//              is accepted more often than under match. Proposers without a
//              distribution (ngram) count as q one-hot on their token.
//
//   none   nothing (spec.method = none is the plain engine, bit for bit)
//   ngram  prompt lookup: the longest suffix of n tokens (spec.ngram_max down to
//          spec.ngram_min) that occurred earlier in the sequence proposes what
//          followed its latest earlier occurrence
//   draft  a smaller Llama-family model (spec.draft_config, spec.draft_weights)
//          on its own CPU executor and paged KV cache drafts greedily (match)
//          or by sampling at the request's settings (rejection); its KV
//          follows the target's accept/rollback (engine/draft_proposer.cpp)
//
// SpeculativeExecutor wraps any executor with one; the engine schedules the
// drafts (counted against max_batch_tokens), rolls back the rejected ones and
// never caches them (engine/scheduler.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/common/choice.h"
#include "engine/common/registry.h"
#include "engine/executor.h"
#include "engine/request.h"

namespace testbed {

class OptionTable;

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Appends to `out` up to k tokens to follow `context` (sequence seq_id's
  // tokens, including the one this step sampled). A proposer that keeps state
  // per sequence (a draft model's KV) keys it by seq_id.
  virtual void propose(int64_t seq_id, const std::vector<int32_t>& context, int k, std::vector<int32_t>& out) = 0;
  // For rejection sampling: drafts drawn from the proposer's own distribution
  // at `sampling`'s settings, appending to `q` one row of vocab_size per draft
  // (the distribution it was drawn from). False when the proposer has no
  // distribution and only called propose() (its q is one-hot on each draft).
  virtual bool propose_sampled(int64_t seq_id, const std::vector<int32_t>& context, int k,
                               const SamplingParams& sampling, std::vector<int32_t>& out, std::vector<float>& q) {
    (void)sampling;
    (void)q;
    propose(seq_id, context, k, out);
    return false;
  }
};

struct ProposerSetup {
  int vocab_size = 0;        // the target's (a draft model must share it)
  int block_size = 16;       // the target's KV block size (a draft model's cache uses it too)
  int num_blocks = 0;        // the target's KV blocks (a draft model's default)
  int max_model_len = 4096;
};
using ProposerRegistry = Registry<Proposer, const ProposerSetup&>;

struct SpecConfig {
  Choice<ProposerRegistry> method{"spec.method", "none", "speculative decoding's proposer"};
  int num_tokens = 4;      // spec.num_tokens: k, tokens drafted per step
  int max_batch_size = 0;  // spec.max_batch_size: above it steps decode plainly (0: no limit)
  std::string verify = "match";  // spec.verify: match | rejection (see above)
  // spec.acceptance, the simulator's acceptance model: "fixed:A", each draft token
  // kept with probability A in [0, 1] ("" for real executors, which verify).
  std::string acceptance;
  bool enabled() const { return method.name != "none"; }
  bool rejection() const { return verify == "rejection"; }
  // A of "fixed:A"; -1 when acceptance is "" or trace:FILE.
  double fixed_acceptance() const;
  // FILE of "trace:FILE" (a results.h5 of a real run of the same workload, whose
  // /requests spec_drafted, spec_accepted, spec_steps give each request's acceptance); "" otherwise.
  std::string acceptance_trace() const;
  void bind(OptionTable& table);
  void validate() const;
};

// Rejection sampling over a batch of drafts (verify_rejection_ref's contract).
using VerifyFn = std::function<void(const VerifyBatch&, const VerifyOutput&)>;

// `inner` with the configured proposer drafting after every sampled token.
// With `rejection`, steps that verify drafts ask `inner` for the target's
// distributions and replace the drafting items' tokens by rejection sampling
// (`verify`, by default inner's verify_rejection) over the q rows kept from
// the proposal; items without drafts keep the target's own draw.
class SpeculativeExecutor : public Executor {
 public:
  SpeculativeExecutor(std::unique_ptr<Executor> inner, std::unique_ptr<Proposer> proposer, int k, int max_batch_size,
                      bool rejection = false, VerifyFn verify = {});
  StepResult execute(const Batch& batch) override;
  std::string name() const override { return inner_->name() + " + proposer"; }
  KvBlockData read_kv_blocks(const std::vector<int32_t>& blocks) const override { return inner_->read_kv_blocks(blocks); }
  void write_kv_blocks(const std::vector<int32_t>& blocks, const KvBlockData& data) override {
    inner_->write_kv_blocks(blocks, data);
  }
  bool embed(const std::vector<int32_t>& prompt, std::vector<float>& out) override { return inner_->embed(prompt, out); }

 private:
  void verify_by_rejection(const Batch& batch, StepResult& r);

  // What a sequence's last proposal drafted, and from which distributions.
  struct Pending {
    std::vector<int32_t> tokens;
    std::vector<float> q;  // [tokens][vocab]
  };
  std::unique_ptr<Executor> inner_;
  std::unique_ptr<Proposer> proposer_;
  int k_, max_batch_size_;
  bool rejection_;
  VerifyFn verify_;
  std::vector<int32_t> context_;
  std::unordered_map<int64_t, Pending> pending_;  // rejection: by sequence id
};

// spec.draft_config of `spec` (the draft model's config.json; "" unless set).
std::string draft_config_path(const SpecConfig& spec);

// spec.method = none: `inner` itself; else `inner` wrapped in a SpeculativeExecutor.
std::unique_ptr<Executor> with_proposer(std::unique_ptr<Executor> inner, const SpecConfig& spec,
                                        const ProposerSetup& setup);

}  // namespace testbed
