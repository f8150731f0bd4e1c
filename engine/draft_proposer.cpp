// spec.method = draft: a smaller Llama-family model drafts on its own CPU
// executor and paged KV cache: greedily (spec.verify = match), or by sampling
// from its distribution, which it returns for rejection sampling.
//
// Per target sequence the draft keeps a Sequence of its own: the tokens it has
// seen (the target's context, then its last drafts) and the blocks holding
// their K/V. Each proposal first rolls the draft back to the longest prefix it
// shares with the target's context (rejected drafts leave, accepted ones
// stay: the draft's KV follows the target's accept/rollback), computes the
// rest of the context in one chunk, and then decodes k tokens one at a time.
// When its cache is full it frees the sequences it served longest ago
// (finished sequences are never announced, so they leave this way).
#include <algorithm>
#include <list>
#include <unordered_map>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/cpu_executor.h"
#include "engine/kv_cache_manager.h"
#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"
#include "engine/proposer.h"

namespace testbed {
namespace {

struct DraftParams : ParamsOf<DraftParams> {
  std::string config;             // spec.draft_config: the draft's Hugging Face config.json
  std::string weights = "dummy";  // spec.draft_weights
  uint64_t seed = 1;              // spec.draft_seed: dummy weights
  int num_blocks = 0;             // spec.draft_num_blocks: its KV blocks (0: the target's)
  void bind(OptionTable& t) override {
    t.add_path("spec.draft_config", &config, "draft model's config.json (spec.method = draft)");
    t.add_path("spec.draft_weights", &weights, "draft model's weights: 'dummy' or a .safetensors file");
    t.add("spec.draft_seed", &seed, "seed of the draft's dummy weights");
    t.add("spec.draft_num_blocks", &num_blocks, "the draft's KV blocks (0: as many as the target's)");
  }
  void validate() const override { require(num_blocks >= 0, "spec.draft_num_blocks", "must be >= 0"); }
  void validate_selected() const override {
    require(!config.empty(), "spec.draft_config", "spec.method = draft needs the draft model's config.json");
  }
};

class DraftProposer : public Proposer {
 public:
  DraftProposer(const DraftParams& p, const ProposerSetup& s)
      : model_(load_model(p.config)),
        num_blocks_(p.num_blocks > 0 ? p.num_blocks : s.num_blocks),
        kv_(num_blocks_, s.block_size, /*enable_prefix_cache=*/false),
        exec_(model_, load_weights(model_, p.weights, p.seed), num_blocks_, s.block_size, s.max_model_len) {
    require(model_.vocab_size == s.vocab_size, "spec.draft_config",
            "the draft's vocabulary (" + std::to_string(model_.vocab_size) + ") is not the target's (" +
                std::to_string(s.vocab_size) + ")");
  }

  void propose(int64_t id, const std::vector<int32_t>& context, int k, std::vector<int32_t>& out) override {
    draft(id, context, k, SamplingParams{}, out, nullptr);
  }

  // Rejection sampling: each draft is drawn from the draft model's distribution
  // at the request's temperature, top-k and top-p, by the draft's own seeded
  // draws (the request's seed mixed with kDraftSeed, so they are not the
  // target's), and that distribution is returned as its q row.
  bool propose_sampled(int64_t id, const std::vector<int32_t>& context, int k, const SamplingParams& sampling,
                       std::vector<int32_t>& out, std::vector<float>& q) override {
    SamplingParams own = sampling;
    own.seed ^= kDraftSeed;
    draft(id, context, k, own, out, &q);
    return true;
  }

 private:
  static constexpr uint64_t kDraftSeed = 0xD4AF7C0DE5EEDull;

  void draft(int64_t id, const std::vector<int32_t>& context, int k, const SamplingParams& sampling,
             std::vector<int32_t>& out, std::vector<float>* q) {
    Sequence& seq = rebase(id, context, k, sampling);
    const int n = static_cast<int>(context.size()) - seq.num_computed_tokens;
    // The context's unseen tokens, then k - 1 drafts, need room (the last draft's K/V is never computed).
    if (!make_room(id, seq, n + k - 1)) return;
    int step_tokens = n;
    for (int j = 0; j < k; ++j) {
      Batch batch;
      batch.add(&seq, seq.num_computed_tokens, step_tokens);
      batch.want_probs = q != nullptr;
      const StepResult r = exec_.execute(batch);
      seq.num_computed_tokens += step_tokens;
      const int32_t t = r.tokens_of(0)[0];
      out.push_back(t);
      if (q) q->insert(q->end(), r.probs.begin(), r.probs.begin() + r.vocab_size);
      seq.append_token(t);
      step_tokens = 1;
    }
  }

  static ModelConfig load_model(const std::string& path) {
    require(!path.empty(), "spec.draft_config", "spec.method = draft needs the draft model's config.json");
    return ModelConfig::from_json_file(path);
  }

  // The draft's sequence for `id`, holding the K/V of the longest prefix it
  // shares with `context` and then exactly `context` as its tokens.
  Sequence& rebase(int64_t id, const std::vector<int32_t>& context, int k, const SamplingParams& sampling) {
    auto it = seqs_.find(id);
    int valid = 0;
    std::vector<int32_t> blocks;
    if (it != seqs_.end()) {
      Sequence& old = *it->second.seq;
      const std::vector<int32_t>& seen = old.tokens();
      const int limit = std::min<int>(old.num_computed_tokens, static_cast<int>(context.size()) - 1);
      while (valid < limit && seen[valid] == context[valid]) ++valid;
      kv_.truncate(old, valid);
      blocks = std::move(old.block_table);
      lru_.erase(it->second.lru);
    }
    Request r;
    r.id = id;
    r.prompt = context;
    r.max_output_tokens = k + 1;
    r.sampling = sampling;
    auto seq = std::make_unique<Sequence>(std::move(r));
    seq->block_table = std::move(blocks);
    seq->num_computed_tokens = valid;
    seq->status = SeqStatus::Running;
    lru_.push_front(id);
    Entry& e = seqs_[id];
    e.seq = std::move(seq);
    e.lru = lru_.begin();
    return *e.seq;
  }

  // Blocks for `tokens` more positions, freeing the least recently served
  // other sequences as needed; false when even that is not enough.
  bool make_room(int64_t id, Sequence& seq, int tokens) {
    while (!kv_.allocate(seq, tokens)) {
      if (lru_.back() == id) return false;
      const int64_t victim = lru_.back();
      lru_.pop_back();
      kv_.free(*seqs_.at(victim).seq);
      seqs_.erase(victim);
    }
    return true;
  }

  struct Entry {
    std::unique_ptr<Sequence> seq;
    std::list<int64_t>::iterator lru;
  };
  ModelConfig model_;
  int num_blocks_;
  KvCacheManager kv_;
  CpuExecutor exec_;
  std::unordered_map<int64_t, Entry> seqs_;
  std::list<int64_t> lru_;  // most recently served first
};

TESTBED_REGISTER(ProposerRegistry, "draft", [](const DraftParams& p, const ProposerSetup& s) {
  return std::make_unique<DraftProposer>(p, s);
});

}  // namespace

std::string draft_config_path(const SpecConfig& spec) {
  return dynamic_cast<const DraftParams&>(spec.method.params("draft")).config;
}

}  // namespace testbed
