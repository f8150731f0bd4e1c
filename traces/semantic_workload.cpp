// semantic: questions that repeat, exactly or paraphrased, for a semantic
// response cache (engine/semantic_cache.h). The intents (which question, exact
// repeat or new wording, paraphrase embedding, topics, difficulty class) are
// an IntentModel (traces/intents.h) on the workload.* intent keys, which
// WorkloadConfig binds (the overlay, workload.intents = overlay, shares them);
// a new wording here is workload.prompt_tokens fresh random tokens.
//
// Sets Request.intent, .embedding (unit norm) and .request_class.
// Seed streams: 2 the per-request draws (GeneratedWorkload), 3 the topics,
// 4 the intents (IntentModel on workload.seed).
#include <string>
#include <vector>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "traces/generated_workload.h"
#include "traces/intents.h"
#include "traces/random_tokens.h"

namespace testbed {
namespace {

struct SemanticParams : ParamsOf<SemanticParams, WorkloadParams> {
  int prompt_tokens = 200;
  void bind(OptionTable& t) override { t.add("workload.prompt_tokens", &prompt_tokens, "semantic: tokens per prompt"); }
  void validate() const override { require(prompt_tokens > 0, "workload.prompt_tokens", "must be positive"); }
  int64_t max_sequence_tokens(const WorkloadConfig& c) const override {
    return int64_t{prompt_tokens} + c.output_tokens;
  }
  bool sets_intents() const override { return true; }
};

class SemanticWorkload : public GeneratedWorkload {
 public:
  SemanticWorkload(const SemanticParams& p, const WorkloadConfig& c, const WorkloadContext& ctx)
      : GeneratedWorkload(c, ctx), p_(p), intents_(c.intents, c.seed) {}

  void fill(Request& r) override {
    const IntentModel::Ask a = intents_.ask(rng_);
    r.prompt.reserve(static_cast<size_t>(p_.prompt_tokens) + c_.output_tokens);
    if (a.repeat) {
      r.prompt.assign(a.repeat->tokens.begin(), a.repeat->tokens.end());
      r.embedding = a.repeat->embedding;
    } else {
      std::vector<int32_t> tokens;
      append_random_tokens(tokens, rng_, p_.prompt_tokens, ctx_.vocab_size);
      const IntentModel::Wording& w = intents_.add_wording(a.intent, std::move(tokens), rng_);
      r.prompt.assign(w.tokens.begin(), w.tokens.end());
      r.embedding = w.embedding;
    }
    r.intent = a.intent;
    r.request_class = a.request_class;
  }

 private:
  SemanticParams p_;
  IntentModel intents_;
};

TESTBED_REGISTER(WorkloadRegistry, "semantic",
                 [](const SemanticParams& p, const WorkloadConfig& c, const WorkloadContext& ctx) {
                   return std::make_unique<SemanticWorkload>(p, c, ctx);
                 });

}  // namespace
}  // namespace testbed
