#include "engine/cost_model.h"

#include <algorithm>

namespace testbed {

void shape_of(const Batch& batch, StepShape& out) {
  out.resize(batch.items.size());
  SeqShape* shapes = out.data();
  for (size_t i = 0; i < batch.items.size(); ++i) {
    const ScheduledSeq& item = batch.items[i];
    shapes[i] = SeqShape{item.num_computed, item.num_new, item.samples(), item.is_decode(), item.num_draft};
  }
}

StepShape step_shape_of(const Batch& batch) {
  StepShape shape;
  shape.reserve(batch.items.size());
  shape_of(batch, shape);
  return shape;
}

StepShape decode_shape(int batch_size, int context) {
  return StepShape(static_cast<size_t>(std::max(batch_size, 0)), SeqShape{context, 1, true, true, 0});
}

StepShape prefill_shape(int num_tokens, int num_computed, bool samples) {
  return StepShape{SeqShape{num_computed, num_tokens, samples, false, 0}};
}

}  // namespace testbed
