#include "engine/frontend.h"

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void FrontendConfig::bind(OptionTable& t) {
  t.add("frontend.request_s", &request_s,
        "seconds from the client sending a request to the engine seeing it (HTTP, tokenization)");
  t.add("frontend.output_lag_steps", &output_lag_steps,
        "a token is visible this many step durations after its step ends (output processing during the next step)");
  t.add("frontend.output_s", &output_s, "then seconds until the client sees it (detokenization, streaming)");
}

void FrontendConfig::validate() const {
  require(request_s >= 0 && request_s < 3600, "frontend.request_s", "must be in [0, 3600) seconds");
  require(output_lag_steps >= 0 && output_lag_steps <= 16, "frontend.output_lag_steps", "must be in [0, 16]");
  require(output_s >= 0 && output_s < 3600, "frontend.output_s", "must be in [0, 3600) seconds");
}

}  // namespace testbed
