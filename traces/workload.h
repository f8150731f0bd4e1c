// Workloads: synthetic generators and trace readers behind RequestSource, chosen
// by workload.kind through one registry, each with its own keys (a
// WorkloadParams struct beside its registration line). Every source is seeded
// and lazy: the same config and seed give the same requests bit for bit, and
// no source holds more than its active state (a trace is read line by line).
// Kinds and keys are documented in traces/README.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/common/choice.h"
#include "engine/common/params.h"
#include "engine/common/registry.h"
#include "engine/request.h"
#include "engine/request_source.h"
#include "traces/intents.h"

namespace testbed {

class OptionTable;
struct WorkloadConfig;

// What a source needs from the rest of the run.
struct WorkloadContext {
  int vocab_size = 32000;
  SamplingParams sampling;
  // The block size the engines taking arrivals hash prompts at (their prefix
  // cache), 0 when none does: a generator that builds prompts from shared
  // parts may hand each request its hashes (traces/prompt_hashes.h).
  int hash_block_size = 0;
};

// The base of every workload kind's own keys: what the kind can tell about
// its requests before generating them.
struct WorkloadParams : Params {
  // Longest prompt + output, when known in advance (0: only the trace would tell).
  virtual int64_t max_sequence_tokens(const WorkloadConfig& /*common*/) const { return 0; }
  // Leading prompt tokens most requests share (a system prompt, a customer
  // prefix), 0 when unknown: profiles lay out KV the way prefix caching shares it.
  virtual int shared_prefix_tokens() const { return 0; }
  // What the engine does with a request that can never run (EngineConfig::on_invalid):
  // a generator's is a configuration error; a trace says with trace.on_invalid.
  virtual std::string on_invalid() const { return "error"; }
  // Whether the kind sets Request.intent, .embedding and .request_class itself
  // (semantic): workload.intents = overlay is then an error.
  virtual bool sets_intents() const { return false; }
};

using WorkloadRegistry = Registry<RequestSource, const WorkloadConfig&, const WorkloadContext&>;

// The keys every workload shares (workload.*); the kind's own keys live in its params.
struct WorkloadConfig {
  Choice<WorkloadRegistry> kind{"workload.kind", "shared_prefix", "request source"};
  int64_t num_requests = 100;
  double rate = 1.0;                // requests per second; 0 = everything at t = 0
  std::string arrival = "poisson";  // poisson | gamma | constant | trace (mix only: its profile's gaps)
  double burstiness = 1.0;          // gamma shape k: CV^2 = 1/k (1 = Poisson, < 1 burstier)
  int output_tokens = 200;
  int num_priorities = 1;           // > 1: each request draws a priority in [0, n) (scheduler.policy = priority)
  // Clients that disconnect: this share of requests is cancelled after an
  // exponential time (cancel_after = time, mean cancel_mean seconds from
  // sending) or number of output tokens (tokens, mean cancel_mean, at least 1).
  double cancel_fraction = 0.0;
  std::string cancel_after = "time";
  double cancel_mean = 1.0;
  uint64_t seed = 1;
  // > 0: up to this many requests generated (and hashed) ahead of the
  // simulation, by a thread of its own or by a multi-threaded fleet's waiting
  // workers (engine/read_ahead_source.h); the same requests either way.
  int read_ahead = 0;
  // workload.intents and the intent keys (traces/intents.h): the overlay's and
  // the semantic kind's, bound here once so both read the same keys.
  IntentParams intents;

  // Registers workload.* and every kind's keys (trace.* among them).
  void bind(OptionTable& table);
  void validate() const;
  // The chosen kind's params (WorkloadParams).
  const WorkloadParams& params() const;
  int max_sequence_tokens() const;
  int shared_prefix_tokens() const;
};

// A request priority drawn for workload.num_priorities > 1 (0 otherwise), from
// its own seed stream so priorities never change the other draws.
class PriorityDraw {
 public:
  explicit PriorityDraw(const WorkloadConfig& c);
  int next();

 private:
  int num_priorities_;
  uint64_t state_;
};

// Marks requests of `inner` for cancellation as workload.cancel_* say, from
// its own seed stream (so cancellations never change the other draws).
class CancellingSource : public RequestSource {
 public:
  CancellingSource(std::unique_ptr<RequestSource> inner, const WorkloadConfig& c);
  std::optional<Request> next() override;
  int64_t size_hint() const override { return inner_->size_hint(); }

 private:
  std::unique_ptr<RequestSource> inner_;
  double fraction_, mean_;
  bool by_tokens_;
  uint64_t state_;
};

// The chosen kind's source, wrapped in an IntentOverlay when workload.intents =
// overlay, then in a CancellingSource when workload.cancel_fraction > 0.
std::unique_ptr<RequestSource> make_workload(const WorkloadConfig& config, const WorkloadContext& context);

}  // namespace testbed
