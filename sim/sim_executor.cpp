#include "sim/sim_executor.h"

#include "engine/rng.h"

namespace testbed {

int32_t placeholder_token(const Request& request, int index, int vocab_size) {
  if (index < static_cast<int>(request.scripted_output.size())) return request.scripted_output[index];
  return static_cast<int32_t>(mix_seed(static_cast<uint64_t>(request.id), static_cast<uint64_t>(index)) %
                              static_cast<uint64_t>(vocab_size));
}

StepResult SimExecutor::execute(const Batch& batch) {
  StepResult r;
  r.tokens.assign(batch.items.size(), -1);
  for (size_t i = 0; i < batch.items.size(); ++i) {
    const ScheduledSeq& item = batch.items[i];
    if (item.samples())
      r.tokens[i] = placeholder_token(item.seq->request(), item.seq->num_output_tokens(), vocab_size_);
  }
  r.duration_s = cost_model_->predict(batch);
  return r;
}

}  // namespace testbed
