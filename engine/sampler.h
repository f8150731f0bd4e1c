// Token sampling: greedy, or temperature with top-k and top-p. Every draw is
// seeded by (params.seed, request id, position), so a sequence samples the same
// tokens whatever batch it rides in and however often it is preempted.
#pragma once

#include <cstdint>

#include "engine/request.h"

namespace testbed {

int32_t sample_token(const float* logits, int vocab_size, const SamplingParams& params, int64_t request_id,
                     int position);

}  // namespace testbed
