#include "sim/sim_executor.h"

#include "engine/rng.h"

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

StepResult SimExecutor::execute(const Batch& batch) {
  StepResult r;
  r.tokens.assign(batch.items.size(), -1);
  for (size_t i = 0; i < batch.items.size(); ++i) {
    const ScheduledSeq& item = batch.items[i];
    if (item.samples()) r.tokens[i] = next_synthetic_token(*item.seq, vocab_size_);
  }
  r.duration_s = cost_model_->predict(batch);
  return r;
}

}  // namespace testbed
