#include "engine/proposer.h"

#include <algorithm>
#include <stdexcept>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void SpecConfig::bind(OptionTable& t) {
  method.bind(t);
  t.add("spec.num_tokens", &num_tokens, "tokens drafted per step (k)");
  t.add("spec.max_batch_size", &max_batch_size, "above this many sequences a step decodes plainly (0: no limit)");
  t.add("spec.verify", &verify,
        "real executors: match (a draft is kept while it is the target's own draw; outputs as without speculation) or "
        "rejection (rejection sampling against the proposer's distribution; outputs follow the target's)");
  t.add("spec.acceptance", &acceptance,
        "simulated executor: fixed:A (each draft token accepted with probability A) or trace:FILE (each request's "
        "acceptance from a real run's results.h5)");
}

std::string SpecConfig::acceptance_trace() const {
  const std::string head = "trace:";
  return acceptance.compare(0, head.size(), head) == 0 ? acceptance.substr(head.size()) : std::string();
}

double SpecConfig::fixed_acceptance() const {
  if (acceptance.empty()) return -1.0;
  if (acceptance.compare(0, 6, "trace:") == 0) {
    require(acceptance.size() > 6, "spec.acceptance", "trace: needs a results file (trace:results/RUN/results.h5)");
    return -1.0;
  }
  const std::string head = "fixed:";
  double a = -1.0;
  require(acceptance.compare(0, head.size(), head) == 0 && parse_value(acceptance.substr(head.size()), a) && a >= 0 &&
              a <= 1,
          "spec.acceptance",
          "'" + acceptance + "' is not fixed:A with A in [0, 1] or trace:FILE");
  return a;
}

void SpecConfig::validate() const {
  method.validate();
  require(num_tokens >= 1 && num_tokens <= 64, "spec.num_tokens", "must be in [1, 64]");
  require(max_batch_size >= 0, "spec.max_batch_size", "must be >= 0 (0: no limit)");
  require(verify == "match" || verify == "rejection", "spec.verify", "'" + verify + "' is not match or rejection");
  require(!rejection() || enabled(), "spec.verify", "rejection needs a proposer (spec.method)");
  fixed_acceptance();
}

SpeculativeExecutor::SpeculativeExecutor(std::unique_ptr<Executor> inner, std::unique_ptr<Proposer> proposer, int k,
                                         int max_batch_size, bool rejection, VerifyFn verify)
    : inner_(std::move(inner)),
      proposer_(std::move(proposer)),
      k_(k),
      max_batch_size_(max_batch_size),
      rejection_(rejection),
      verify_(std::move(verify)) {}

StepResult SpeculativeExecutor::execute(const Batch& batch) {
  StepResult r;
  bool drafting = false;
  for (const ScheduledSeq& item : batch.items) drafting |= item.num_draft > 0 && item.samples();
  if (rejection_ && drafting) {
    verify_by_rejection(batch, r);
  } else {
    r = inner_->execute(batch);
  }
  if (rejection_) {  // proposals verified (or dropped by the scheduler) are spent
    for (const ScheduledSeq& item : batch.items)
      if (item.samples()) pending_.erase(item.seq->id());
  }
  if (max_batch_size_ > 0 && batch.num_seqs() > max_batch_size_) return r;  // decode is not memory-bound here
  r.draft_offsets.assign(1, 0);
  r.drafts.clear();
  for (int i = 0; i < batch.num_seqs(); ++i) {
    const int n = r.num_tokens(i);
    if (n > 0) {
      const Sequence& seq = *batch.items[i].seq;
      // The sequence as it will be after this step: its tokens, then what this step appends.
      context_.assign(seq.tokens().begin(), seq.tokens().end());
      context_.insert(context_.end(), r.tokens_of(i), r.tokens_of(i) + n);
      const int room = seq.max_output_tokens() - seq.num_output_tokens() - n - 1;  // the last token is never a draft
      if (room > 0) {
        const int k = std::min(k_, room);
        if (!rejection_) {
          proposer_->propose(seq.id(), context_, k, r.drafts);
        } else {
          const size_t first = r.drafts.size();
          Pending p;
          const bool has_q = proposer_->propose_sampled(seq.id(), context_, k, seq.request().sampling, r.drafts, p.q);
          p.tokens.assign(r.drafts.begin() + first, r.drafts.end());
          if (!p.tokens.empty()) {
            if (!has_q) p.q.clear();  // one-hot rows are built when verifying
            pending_[seq.id()] = std::move(p);
          }
        }
      }
    }
    r.draft_offsets.push_back(static_cast<int32_t>(r.drafts.size()));
  }
  return r;
}

void SpeculativeExecutor::verify_by_rejection(const Batch& batch, StepResult& r) {
  Batch scored = batch;
  scored.want_probs = true;  // the target's distribution at every verified position
  r = inner_->execute(scored);
  const int V = r.vocab_size;
  if (V <= 0 || r.prob_offsets.size() != batch.items.size() + 1)
    throw std::logic_error(inner_->name() + ": no probabilities returned for rejection sampling");
  // The drafting items, compacted into one verify batch.
  std::vector<int> which;
  std::vector<int32_t> offsets{0}, drafts, positions;
  std::vector<uint64_t> seeds;
  std::vector<int64_t> ids;
  std::vector<float> p, q;
  for (int i = 0; i < batch.num_seqs(); ++i) {
    const ScheduledSeq& item = batch.items[i];
    if (item.num_draft == 0 || !item.samples()) continue;
    const Sequence& seq = *item.seq;
    auto it = pending_.find(seq.id());
    const std::vector<int32_t>& d = seq.draft_tokens();
    if (it == pending_.end() || it->second.tokens.size() < static_cast<size_t>(item.num_draft) ||
        !std::equal(d.begin(), d.begin() + item.num_draft, it->second.tokens.begin()))
      throw std::logic_error("speculation: sequence " + std::to_string(seq.id()) +
                             " verifies drafts this executor did not propose");
    which.push_back(i);
    drafts.insert(drafts.end(), d.begin(), d.begin() + item.num_draft);
    offsets.push_back(static_cast<int32_t>(drafts.size()));
    seeds.push_back(seq.request().sampling.seed);
    ids.push_back(seq.id());
    positions.push_back(item.num_computed + item.num_new - item.num_draft);  // the first sampled position
    const float* rows = r.probs.data() + static_cast<size_t>(r.prob_offsets[i]) * V;
    p.insert(p.end(), rows, rows + static_cast<size_t>(item.num_draft + 1) * V);
    const Pending& pend = it->second;
    if (!pend.q.empty()) {
      q.insert(q.end(), pend.q.begin(), pend.q.begin() + static_cast<size_t>(item.num_draft) * V);
    } else {  // a proposer without a distribution: one-hot on its token
      for (int j = 0; j < item.num_draft; ++j) {
        q.resize(q.size() + V, 0.0f);
        q[q.size() - V + d[j]] = 1.0f;
      }
    }
  }
  VerifyBatch vb;
  vb.num_seqs = static_cast<int>(which.size());
  vb.vocab = V;
  vb.draft_offsets = offsets.data();
  vb.draft_tokens = drafts.data();
  vb.target_probs = p.data();
  vb.draft_probs = q.data();
  vb.seeds = seeds.data();
  vb.request_ids = ids.data();
  vb.positions = positions.data();
  std::vector<int32_t> accepted(which.size()), emitted(drafts.size() + which.size());
  const VerifyOutput vo{accepted.data(), emitted.data()};
  if (verify_)
    verify_(vb, vo);
  else
    inner_->verify_rejection(vb, vo);
  // Rebuild the tokens: the drafting items' from the verification, the others' as sampled.
  StepResult out;
  out.reserve(batch.items.size());
  size_t w = 0;
  for (int i = 0; i < batch.num_seqs(); ++i) {
    if (w < which.size() && which[w] == i) {
      out.add_item(emitted.data() + offsets[w] + w, accepted[w] + 1);
      ++w;
    } else {
      out.add_item(r.tokens_of(i), r.num_tokens(i));
    }
  }
  out.duration_s = r.duration_s;
  if (batch.want_probs) {
    out.prob_offsets = std::move(r.prob_offsets);
    out.probs = std::move(r.probs);
    out.vocab_size = V;
  }
  r = std::move(out);
}

std::unique_ptr<Executor> with_proposer(std::unique_ptr<Executor> inner, const SpecConfig& spec,
                                        const ProposerSetup& setup) {
  if (!spec.enabled()) return inner;
  return std::make_unique<SpeculativeExecutor>(std::move(inner), spec.method.create(setup), spec.num_tokens,
                                               spec.max_batch_size, spec.rejection());
}

namespace {

class NoProposer : public Proposer {
 public:
  void propose(int64_t, const std::vector<int32_t>&, int, std::vector<int32_t>&) override {}
};

struct NgramParams : ParamsOf<NgramParams> {
  int ngram_min = 1, ngram_max = 3;
  void bind(OptionTable& t) override {
    t.add("spec.ngram_min", &ngram_min, "shortest suffix the n-gram proposer matches");
    t.add("spec.ngram_max", &ngram_max, "longest suffix the n-gram proposer matches");
  }
  void validate() const override {
    require(ngram_min >= 1, "spec.ngram_min", "must be >= 1");
    require(ngram_max >= ngram_min && ngram_max <= 64, "spec.ngram_max", "must be in [spec.ngram_min, 64]");
  }
};

class NgramProposer : public Proposer {
 public:
  explicit NgramProposer(const NgramParams& p) : min_(p.ngram_min), max_(p.ngram_max) {}
  void propose(int64_t, const std::vector<int32_t>& c, int k, std::vector<int32_t>& out) override {
    const int len = static_cast<int>(c.size());
    for (int n = std::min(max_, len - 1); n >= min_; --n) {
      const int32_t* suffix = c.data() + len - n;
      // The latest earlier occurrence (it may overlap the suffix, not be it).
      for (int j = len - n - 1; j >= 0; --j) {
        if (!std::equal(suffix, suffix + n, c.data() + j)) continue;
        const int from = j + n, to = std::min(len, from + k);
        out.insert(out.end(), c.begin() + from, c.begin() + to);
        return;
      }
    }
  }

 private:
  int min_, max_;
};

TESTBED_REGISTER(ProposerRegistry, "none", [](const ProposerSetup&) { return std::make_unique<NoProposer>(); });
TESTBED_REGISTER(ProposerRegistry, "ngram",
                 [](const NgramParams& p, const ProposerSetup&) { return std::make_unique<NgramProposer>(p); });

}  // namespace
}  // namespace testbed
