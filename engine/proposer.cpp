#include "engine/proposer.h"

#include <algorithm>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void SpecConfig::bind(OptionTable& t) {
  method.bind(t);
  t.add("spec.num_tokens", &num_tokens, "tokens drafted per step (k)");
  t.add("spec.max_batch_size", &max_batch_size, "above this many sequences a step decodes plainly (0: no limit)");
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
  fixed_acceptance();
}

SpeculativeExecutor::SpeculativeExecutor(std::unique_ptr<Executor> inner, std::unique_ptr<Proposer> proposer, int k,
                                         int max_batch_size)
    : inner_(std::move(inner)), proposer_(std::move(proposer)), k_(k), max_batch_size_(max_batch_size) {}

StepResult SpeculativeExecutor::execute(const Batch& batch) {
  StepResult r = inner_->execute(batch);
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
      if (room > 0) proposer_->propose(seq.id(), context_, std::min(k_, room), r.drafts);
    }
    r.draft_offsets.push_back(static_cast<int32_t>(r.drafts.size()));
  }
  return r;
}

std::unique_ptr<Executor> with_proposer(std::unique_ptr<Executor> inner, const SpecConfig& spec,
                                        const ProposerSetup& setup) {
  if (!spec.enabled()) return inner;
  return std::make_unique<SpeculativeExecutor>(std::move(inner), spec.method.create(setup), spec.num_tokens,
                                               spec.max_batch_size);
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
