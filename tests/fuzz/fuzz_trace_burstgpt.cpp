// trace.format = burstgpt: any bytes as a trace file.
#include "fuzz_trace_common.h"

FUZZ_TARGET(trace_burstgpt) { return testbed_fuzz::replay_trace("burstgpt", data, size); }
