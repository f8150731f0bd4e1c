#include "sim/sim_executor.h"

#include "engine/common/config_error.h"
#include "engine/common/rng.h"

namespace testbed {

int32_t synthetic_token(const Request& request, int index, int vocab_size) {
  if (index < static_cast<int>(request.scripted_output.size())) return request.scripted_output[index];
  const uint64_t x = mix_seed(static_cast<uint64_t>(request.id), static_cast<uint64_t>(index));
  return static_cast<int32_t>((static_cast<unsigned __int128>(x) * static_cast<uint64_t>(vocab_size)) >> 64);
}

int32_t next_synthetic_token(const Sequence& seq, int vocab_size) {
  const int index = seq.num_output_tokens();
  if (seq.has_scripted_output()) return synthetic_token(seq.request(), index, vocab_size);
  // Multiply-high instead of %: a 64-bit division per token is measurable here.
  const uint64_t x = mix_seed(static_cast<uint64_t>(seq.id()), static_cast<uint64_t>(index));
  return static_cast<int32_t>((static_cast<unsigned __int128>(x) * static_cast<uint64_t>(vocab_size)) >> 64);
}

void synthetic_tokens(const Batch& batch, int vocab_size, StepResult& result) {
  result.token_offsets.assign(1, 0);
  result.tokens.clear();
  result.prob_offsets.clear();
  result.probs.clear();
  result.draft_offsets.clear();
  result.drafts.clear();
  result.reserve(batch.items.size());
  for (const ScheduledSeq& item : batch.items) {
    if (item.samples())
      result.add_token(next_synthetic_token(*item.seq, vocab_size));
    else
      result.add_none();
  }
}

StepResult SimExecutor::execute(const Batch& batch) {
  StepResult r;
  execute(batch, r);
  return r;
}

void SimExecutor::execute(const Batch& batch, StepResult& out) {
  synthetic_tokens(batch, vocab_size_, out);
  shape_of(batch, shape_);
  out.duration_s = cost_model_->predict(shape_);
}

TESTBED_REGISTER(ExecutorRegistry, "sim", [](const ExecutorSetup& s) {
  require(s.cost_model != nullptr, "cost_model.kind", "the simulated executor needs a cost model");
  return std::make_unique<SimExecutor>(s.cost_model, s.model.vocab_size);
});

}  // namespace testbed
