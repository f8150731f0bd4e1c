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

#include "traces/generated_workload.h"
#include "traces/random_tokens.h"
#include "traces/zipf_sampler.h"

namespace testbed {
namespace {

class RagWorkload : public GeneratedWorkload {
 public:
  RagWorkload(const WorkloadConfig& c, const WorkloadContext& ctx)
      : GeneratedWorkload(c, ctx),
        popularity_(c.num_documents, c.zipf_s),
        document_seed_(mix_seed(c.seed, 5)) {
    append_span_tokens(system_prompt_, mix_seed(c.seed, 3), 0, c.system_prompt_tokens, ctx.vocab_size);
  }

  void fill(Request& r) override {
    r.prompt.reserve(system_prompt_.size() + static_cast<size_t>(c_.documents_per_request) * c_.document_tokens +
                     c_.user_tokens + c_.output_tokens);
    r.prompt = system_prompt_;
    for (int64_t doc : popularity_.draw_distinct(rng_, c_.documents_per_request))
      append_span_tokens(r.prompt, document_seed_, static_cast<uint64_t>(doc), c_.document_tokens, ctx_.vocab_size);
    append_random_tokens(r.prompt, rng_, c_.user_tokens, ctx_.vocab_size);
  }

 private:
  ZipfSampler popularity_;
  uint64_t document_seed_;
  std::vector<int32_t> system_prompt_;
};

TESTBED_REGISTER(WorkloadRegistry, "rag", [](const WorkloadConfig& c, const WorkloadContext& ctx) {
  return std::make_unique<RagWorkload>(c, ctx);
});

}  // namespace
}  // namespace testbed
