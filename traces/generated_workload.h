// GeneratedWorkload: the skeleton every synthetic generator shares: request
// ids in order, arrivals from workload.arrival at workload.rate (seed stream
// 1), a content generator (seed stream 2), the output length, priority and
// sampling. A generator only writes each request's prompt (fill).
#pragma once

#include <optional>

#include "engine/common/rng.h"
#include "traces/arrivals.h"
#include "traces/workload.h"

namespace testbed {

class GeneratedWorkload : public RequestSource {
 public:
  GeneratedWorkload(const WorkloadConfig& c, const WorkloadContext& ctx)
      : c_(c),
        ctx_(ctx),
        rng_(mix_seed(c.seed, 2)),
        arrivals_(c.arrival, c.rate, c.burstiness, mix_seed(c.seed, 1)),
        priorities_(c) {}

  std::optional<Request> next() final {
    if (next_id_ >= c_.num_requests) return std::nullopt;
    Request r;
    r.id = next_id_++;
    r.arrival_s = arrivals_.next();
    fill(r);
    r.max_output_tokens = c_.output_tokens;
    r.sampling = ctx_.sampling;
    r.priority = priorities_.next();
    return r;
  }
  int64_t size_hint() const final { return c_.num_requests; }

 protected:
  // Writes r.prompt (reserving room for the output too: the engine appends
  // generated tokens to it) and whatever else the generator sets.
  virtual void fill(Request& r) = 0;

  const WorkloadConfig c_;  // the shared workload.* keys
  const WorkloadContext ctx_;
  Rng rng_;

 private:
  ArrivalProcess arrivals_;
  PriorityDraw priorities_;
  int64_t next_id_ = 0;
};

// workload.system_prompt_tokens and workload.user_tokens: the prompt shape
// several generators share (each binds them; they are one key).
struct PromptShape {
  int system_prompt_tokens = 2000;  // the shared system prompt
  int user_tokens = 200;            // the user message (per turn; rag: the question)
  void bind(OptionTable& table);
  void validate() const;
};

}  // namespace testbed
