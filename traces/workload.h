// Workloads: synthetic generators and trace readers behind RequestSource, chosen
// by workload.kind through one registry. Every source is seeded and lazy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/registry.h"
#include "engine/request.h"
#include "engine/request_source.h"

namespace testbed {

class OptionTable;

struct WorkloadConfig {
  std::string kind = "shared_prefix";
  int64_t num_requests = 100;
  double rate = 1.0;                 // requests per second; 0 = everything at t = 0
  std::string arrival = "poisson";   // poisson | gamma | constant
  double burstiness = 1.0;           // gamma shape k: CV^2 = 1/k (1 = Poisson, < 1 burstier)
  int system_prompt_tokens = 2000;   // shared_prefix: the shared part
  int user_tokens = 200;             // shared_prefix: the unique part
  int output_tokens = 200;
  int num_prefixes = 1;              // shared_prefix: distinct system prompts, drawn uniformly
  uint64_t seed = 1;
  // Registers the workload.* keys (the CLI's one table of keys).
  void bind(OptionTable& table);
  void validate() const;
  // Longest sequence (prompt + output) the workload produces, when a generator
  // knows it in advance; 0 when only reading the trace would tell.
  int max_sequence_tokens() const;
};

// What a source needs from the rest of the run.
struct WorkloadContext {
  int vocab_size = 32000;
  SamplingParams sampling;
};

using WorkloadRegistry = Registry<RequestSource, const WorkloadConfig&, const WorkloadContext&>;

std::unique_ptr<RequestSource> make_workload(const WorkloadConfig& config, const WorkloadContext& context);

}  // namespace testbed
