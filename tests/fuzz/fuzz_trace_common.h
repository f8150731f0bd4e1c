// The trace harnesses: a trace file of the given format replayed through the
// whole reader (TraceSource: lines, arrivals, limits; the format: fields), as
// `workload.kind = trace` does in a run.
#pragma once

#include "engine/common/option_table.h"
#include "fuzz_target.h"
#include "traces/workload.h"

namespace testbed_fuzz {

inline int replay_trace(const char* format, const uint8_t* data, size_t size) {
  const std::string path = write_input(data, size, std::string(".") + format);
  expect_config_error_only([&] {
    testbed::WorkloadConfig w;
    testbed::set_options(w, {{"workload.kind", "trace"}, {"trace.format", format}, {"trace.path", path},
                             {"trace.max_requests", "2000"}});
    testbed::WorkloadContext context;
    context.vocab_size = 512;
    auto source = testbed::make_workload(w, context);
    while (source->next()) {
    }
  });
  return 0;
}

}  // namespace testbed_fuzz
