// Generators that build prompts from shared parts (a system prompt, a
// conversation's history) hand each request its block hashes when told the
// engines' block size (WorkloadContext.hash_block_size; traces/prompt_hashes.h):
// they must be the hashes of the whole prompt computed from scratch, on the
// same prompts as without them.
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/block_hash.h"
#include "trace_test_util.h"
#include "traces/prompt_hashes.h"

using namespace testbed;
using namespace testbed::test;

namespace {

std::vector<Request> drain_hashed(const WorkloadConfig& c, int block_size) { return drain(c, 32000, block_size); }

// Every request's hashes are those of its prompt, and the prompts are those
// of the same workload generated without hashing.
void check_hashes(const WorkloadConfig& c, int block_size) {
  const std::vector<Request> plain = drain_hashed(c, 0), hashed = drain_hashed(c, block_size);
  REQUIRE(plain.size() == hashed.size());
  REQUIRE(!plain.empty());
  size_t blocks = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("request " << i);
    CHECK(plain[i].prompt_hash_block_size == 0);
    CHECK(plain[i].prompt_block_hashes.empty());
    REQUIRE(hashed[i].prompt == plain[i].prompt);
    CHECK(hashed[i].scripted_output == plain[i].scripted_output);
    CHECK(hashed[i].arrival_s == plain[i].arrival_s);
    CHECK(hashed[i].prompt_hash_block_size == block_size);
    std::vector<uint64_t> want;
    extend_block_hashes(want, hashed[i].prompt, block_size, 0);
    CHECK(hashed[i].prompt_block_hashes == want);
    blocks += want.size();
  }
  CHECK(blocks > plain.size());  // prompts of several blocks: the chain was exercised
}

}  // namespace

TEST_CASE("shared_prefix hands out each prompt's hashes, its system prompt hashed once", "[traces][prompt_hashes]") {
  WorkloadConfig c;
  // A system prompt that ends inside a block (50 = 3 blocks of 16 + 2), several of them.
  set_options(c, {{"workload.kind", "shared_prefix"},
                  {"workload.num_requests", "300"},
                  {"workload.system_prompt_tokens", "50"},
                  {"workload.user_tokens", "21"},
                  {"workload.num_prefixes", "4"}});
  check_hashes(c, 16);
  check_hashes(c, 7);
}

TEST_CASE("mix hands out each prompt's hashes: system prompts, singles and conversations' turns",
          "[traces][prompt_hashes]") {
  WorkloadConfig c;
  set_options(c, {{"workload.kind", "mix"},
                  {"workload.num_requests", "2000"},
                  {"workload.rate", "50"},
                  {"workload.output_tokens", "13"},
                  {"workload.system_prompt_tokens", "70"},
                  {"workload.user_tokens", "9"},
                  {"workload.num_prefixes", "3"},
                  {"workload.turns", "4"},
                  {"workload.turn_gap_s", "1"},
                  {"workload.share_shared", "0.4"},
                  {"workload.share_chat", "0.4"}});
  check_hashes(c, 16);
  // Lengths from a profile trace's rows, some shorter than the system prompt
  // (a prompt then holds only its first length - 1 tokens, ending inside a block).
  ScratchDir dir("prompt_hashes");
  const std::string trace = dir.write("azure.csv",
                                      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                      "2023-11-16 18:00:00.0000000,40,5\n"
                                      "2023-11-16 18:00:01.0000000,100,9\n"
                                      "2023-11-16 18:00:02.0000000,33,2\n"
                                      "2023-11-16 18:00:04.0000000,71,30\n");
  WorkloadConfig profiled = c;
  set_options(profiled, {{"workload.profile_trace", trace}, {"workload.profile_format", "azure"}});
  check_hashes(profiled, 16);
  check_hashes(profiled, 5);
  // Conversations' later turns are there: prompts that are a previous request's prompt and answer, extended.
  const std::vector<Request> r = drain_hashed(c, 16);
  int later_turns = 0;
  for (size_t i = 0; i < r.size(); ++i)
    for (size_t j = 0; j < i && later_turns < 10; ++j)
      if (r[j].session_id >= 0 && r[i].session_id == r[j].session_id &&
          r[i].prompt.size() > r[j].prompt.size() + r[j].scripted_output.size()) {
        ++later_turns;
        break;
      }
  CHECK(later_turns >= 10);
}

TEST_CASE("multi_turn hands out each turn's hashes, extending its session's", "[traces][prompt_hashes]") {
  WorkloadConfig c;
  set_options(c, {{"workload.kind", "multi_turn"},
                  {"workload.num_requests", "600"},
                  {"workload.rate", "40"},
                  {"workload.output_tokens", "11"},
                  {"workload.system_prompt_tokens", "37"},
                  {"workload.user_tokens", "6"},
                  {"workload.turns", "5"},
                  {"workload.turn_gap_s", "0.5"}});
  check_hashes(c, 16);
  check_hashes(c, 3);
}

TEST_CASE("PromptHashes: a salted request is hashed from scratch", "[traces][prompt_hashes]") {
  PromptHashes h(4);
  const std::vector<int32_t> prefix = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<uint64_t>& leading = h.part(0, prefix);
  REQUIRE(leading.size() == 2);
  CHECK(&h.part(0, prefix) == &leading);  // kept
  Request r;
  r.prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  r.cache_salt = 99;
  h.finish(r, leading, 2);
  std::vector<uint64_t> want;
  extend_block_hashes(want, r.prompt, 4, 99);
  CHECK(r.prompt_block_hashes == want);
  CHECK(r.prompt_hash_block_size == 4);
  Request u;
  u.prompt = r.prompt;
  h.finish(u, leading, 2);
  want.clear();
  extend_block_hashes(want, u.prompt, 4, 0);
  CHECK(u.prompt_block_hashes == want);
  PromptHashes off(0);
  Request v;
  v.prompt = r.prompt;
  off.finish(v, {});
  CHECK(v.prompt_block_hashes.empty());
  CHECK(v.prompt_hash_block_size == 0);
}
