// Profiling the configured real executor (shared by `testbed profile` and `testbed fidelity`).
#pragma once

#include "experiments/cli/run_config.h"
#include "sim/profile_table.h"

namespace testbed {

// max_context <= 0: the workload's longest sequence, else min(max_model_len, 4096).
ProfileTable profile_configured_executor(const RunConfig& config, int repeats, int max_context);

}  // namespace testbed
