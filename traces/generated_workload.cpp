#include "traces/generated_workload.h"

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void PromptShape::bind(OptionTable& t) {
  t.add("workload.system_prompt_tokens", &system_prompt_tokens,
        "shared_prefix, multi_turn, rag: shared system prompt length");
  t.add("workload.user_tokens", &user_tokens, "shared_prefix, multi_turn, rag: user message (per turn; rag: question)");
}

void PromptShape::validate() const {
  require(system_prompt_tokens >= 0, "workload.system_prompt_tokens", "must be >= 0");
  require(user_tokens >= 0, "workload.user_tokens", "must be >= 0");
  require(system_prompt_tokens + user_tokens > 0, "workload.user_tokens", "a prompt needs at least one token");
}

}  // namespace testbed
