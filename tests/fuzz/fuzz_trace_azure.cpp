// trace.format = azure: any bytes as a trace file.
#include "fuzz_trace_common.h"

FUZZ_TARGET(trace_azure) { return testbed_fuzz::replay_trace("azure", data, size); }
