// trace.format = mooncake: any bytes as a trace file.
#include "fuzz_trace_common.h"

FUZZ_TARGET(trace_mooncake) { return testbed_fuzz::replay_trace("mooncake", data, size); }
