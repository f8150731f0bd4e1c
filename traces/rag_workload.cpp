// rag: retrieval-augmented prompts over a shared document pool. Each prompt is
//   shared system prompt + k documents + a unique question,
// with k = workload.documents_per_request distinct documents drawn from a pool
// of workload.num_documents documents of workload.document_tokens tokens each,
// by Zipf(workload.zipf_s) popularity (document 0 most popular). Documents keep
// their draw order, as a retriever's ranking would: a prefix cache reuses the
// system prompt and the leading documents two requests have in the same order,
// nothing after the first difference (reusing out-of-order documents needs
// position-independent KV reuse, which a prefix cache does not do).
// Documents are generated on demand from (seed, document id): the pool is never
// held in memory, only the Zipf table (one double per document).
#include <vector>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "traces/generated_workload.h"
#include "traces/random_tokens.h"
#include "traces/zipf_sampler.h"

namespace testbed {
namespace {

struct RagParams : ParamsOf<RagParams, WorkloadParams> {
  PromptShape shape;
  int num_documents = 1000;
  int document_tokens = 500;
  int documents_per_request = 4;
  double zipf_s = 1.0;  // popularity of rank r is proportional to 1 / r^s
  void bind(OptionTable& t) override {
    shape.bind(t);
    t.add("workload.num_documents", &num_documents, "rag: documents in the pool");
    t.add("workload.document_tokens", &document_tokens, "rag: tokens per document");
    t.add("workload.documents_per_request", &documents_per_request, "rag: documents in each prompt");
    t.add("workload.zipf_s", &zipf_s, "rag: Zipf exponent of document popularity (0 = uniform)");
  }
  void validate() const override {
    shape.validate();
    require(num_documents > 0, "workload.num_documents", "must be positive");
    require(document_tokens > 0, "workload.document_tokens", "must be positive");
    require(documents_per_request >= 0 && documents_per_request <= num_documents, "workload.documents_per_request",
            "must be in [0, workload.num_documents]");
    require(zipf_s >= 0, "workload.zipf_s", "must be >= 0 (0 = uniform)");
  }
  int64_t max_sequence_tokens(const WorkloadConfig& c) const override {
    return shape.system_prompt_tokens + int64_t{documents_per_request} * document_tokens + shape.user_tokens +
           c.output_tokens;
  }
  int shared_prefix_tokens() const override { return shape.system_prompt_tokens; }
};

class RagWorkload : public GeneratedWorkload {
 public:
  RagWorkload(const RagParams& p, const WorkloadConfig& c, const WorkloadContext& ctx)
      : GeneratedWorkload(c, ctx),
        p_(p),
        popularity_(p.num_documents, p.zipf_s),
        document_seed_(mix_seed(c.seed, 5)) {
    append_span_tokens(system_prompt_, mix_seed(c.seed, 3), 0, p.shape.system_prompt_tokens, ctx.vocab_size);
  }

  void fill(Request& r) override {
    r.prompt.reserve(system_prompt_.size() + static_cast<size_t>(p_.documents_per_request) * p_.document_tokens +
                     p_.shape.user_tokens + c_.output_tokens);
    r.prompt = system_prompt_;
    for (int64_t doc : popularity_.draw_distinct(rng_, p_.documents_per_request))
      append_span_tokens(r.prompt, document_seed_, static_cast<uint64_t>(doc), p_.document_tokens, ctx_.vocab_size);
    append_random_tokens(r.prompt, rng_, p_.shape.user_tokens, ctx_.vocab_size);
  }

 private:
  RagParams p_;
  ZipfSampler popularity_;
  uint64_t document_seed_;
  std::vector<int32_t> system_prompt_;
};

TESTBED_REGISTER(WorkloadRegistry, "rag", [](const RagParams& p, const WorkloadConfig& c, const WorkloadContext& ctx) {
  return std::make_unique<RagWorkload>(p, c, ctx);
});

}  // namespace
}  // namespace testbed
