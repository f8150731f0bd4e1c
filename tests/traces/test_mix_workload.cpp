// workload.kind = mix: the three classes at their shares, conversations that
// extend their history, lengths drawn from a profile trace's rows, and
// arrivals that replay the profile's gaps at workload.rate.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "trace_test_util.h"
#include "traces/trace_profile.h"

using namespace testbed;
using namespace testbed::test;

namespace {

constexpr int kSystem = 64, kUser = 16, kOutput = 8;

WorkloadConfig mix(int64_t n, const std::vector<std::pair<std::string, std::string>>& more = {}) {
  WorkloadConfig c;
  set_options(c, {{"workload.kind", "mix"},
                  {"workload.num_requests", std::to_string(n)},
                  {"workload.rate", "50"},
                  {"workload.output_tokens", std::to_string(kOutput)},
                  {"workload.system_prompt_tokens", std::to_string(kSystem)},
                  {"workload.user_tokens", std::to_string(kUser)},
                  {"workload.turns", "3"},
                  {"workload.turn_gap_s", "1"},
                  {"workload.share_shared", "0.4"},
                  {"workload.share_chat", "0.3"}});
  set_options(c, more);
  return c;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

// An Azure-format trace: rows (seconds after the first, input, output).
std::string azure_trace(const std::vector<std::tuple<double, int, int>>& rows) {
  std::string out = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  for (const auto& [t, in, o] : rows) {
    const int whole = static_cast<int>(t);
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "2023-11-16 18:%02d:%02d.%07d", whole / 60, whole % 60,
                  static_cast<int>((t - whole) * 1e7 + 0.5));
    out += std::string(stamp) + "," + std::to_string(in) + "," + std::to_string(o) + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("mix is deterministic per seed with ids and arrivals in order", "[traces][mix]") {
  const WorkloadConfig c = mix(500);
  const auto a = drain(c), b = drain(c);
  REQUIRE(a.size() == 500);
  REQUIRE(b.size() == 500);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].id == static_cast<int64_t>(i));
    CHECK(a[i].prompt == b[i].prompt);
    CHECK(a[i].arrival_s == b[i].arrival_s);
    CHECK(a[i].scripted_output == b[i].scripted_output);
    if (i > 0) CHECK(a[i].arrival_s >= a[i - 1].arrival_s);
  }
  WorkloadConfig other = c;
  other.seed = 7;
  CHECK(drain(other)[0].prompt != a[0].prompt);
}

TEST_CASE("mix draws its classes at their shares of requests and keeps the rate", "[traces][mix]") {
  const auto requests = drain(mix(30000));
  REQUIRE(requests.size() == 30000);
  // The system prompt: the leading tokens every conversation's first turn opens with.
  const Request* first_chat = nullptr;
  for (const auto& r : requests)
    if (r.session_id >= 0) {
      first_chat = &r;
      break;
    }
  REQUIRE(first_chat != nullptr);
  const std::vector<int32_t> system(first_chat->prompt.begin(), first_chat->prompt.begin() + kSystem);
  int64_t chat = 0, shared = 0, unique = 0;
  for (const auto& r : requests) {
    const size_t common = common_prefix(r.prompt, system);
    if (r.session_id >= 0) {
      ++chat;
      CHECK(common == static_cast<size_t>(kSystem));
      CHECK(r.scripted_output.size() == static_cast<size_t>(kOutput));
    } else if (common == static_cast<size_t>(kSystem)) {
      ++shared;
      CHECK(r.prompt.size() == static_cast<size_t>(kSystem + kUser));
      CHECK(r.scripted_output.empty());
    } else {
      ++unique;
      CHECK(common < 16);  // not one block in common with the system prompt
      CHECK(r.prompt.size() == static_cast<size_t>(kSystem + kUser));
    }
  }
  const double n = static_cast<double>(requests.size());
  CHECK(chat / n == Approx(0.3).margin(0.015));
  CHECK(shared / n == Approx(0.4).margin(0.015));
  CHECK(unique / n == Approx(0.3).margin(0.015));
  // Starts come at rate x (1 - share_chat + share_chat / turns), so requests come at the rate.
  CHECK(n / requests.back().arrival_s == Approx(50.0).epsilon(0.03));
}

TEST_CASE("mix conversations extend their history turn by turn", "[traces][mix]") {
  const auto requests = drain(mix(3000));
  std::map<int64_t, std::vector<const Request*>> conversations;
  for (const auto& r : requests)
    if (r.session_id >= 0) conversations[r.session_id].push_back(&r);
  REQUIRE(conversations.size() > 100);
  int complete = 0;
  for (const auto& [id, turns] : conversations) {
    INFO("conversation " << id);
    CHECK(turns.size() <= 3);
    complete += turns.size() == 3;
    for (size_t k = 1; k < turns.size(); ++k) {
      const Request& prev = *turns[k - 1];
      const Request& r = *turns[k];
      std::vector<int32_t> history = prev.prompt;
      history.insert(history.end(), prev.scripted_output.begin(), prev.scripted_output.end());
      CHECK(r.prompt.size() == history.size() + kUser);
      CHECK(common_prefix(r.prompt, history) == history.size());
      CHECK(r.arrival_s >= prev.arrival_s);
    }
  }
  // Only the conversations still open when the last request is emitted are cut short.
  CHECK(complete > static_cast<int>(conversations.size()) - 60);
}

TEST_CASE("mix with a profile trace takes every length from one of its rows", "[traces][mix]") {
  ScratchDir dir("mix_profile");
  const std::vector<std::tuple<double, int, int>> rows = {{0, 100, 5}, {1, 40, 9}, {2, 300, 2}, {4, 70, 30}};
  const std::string trace = dir.write("azure.csv", azure_trace(rows));
  const auto requests = drain(mix(4000, {{"workload.profile_trace", trace}, {"workload.profile_format", "azure"}}));
  REQUIRE(requests.size() == 4000);
  std::set<std::pair<int, int>> allowed;
  for (const auto& [t, in, o] : rows) allowed.insert({in, o});
  std::set<int64_t> started;
  std::map<int, int> outputs;
  for (const auto& r : requests) {
    INFO("request " << r.id << " input " << r.prompt.size() << " output " << r.max_output_tokens);
    ++outputs[r.max_output_tokens];
    // A single request or a conversation's first turn is one row; a later
    // turn takes the row's output only (its prompt is its history + a message).
    const bool later_turn = r.session_id >= 0 && !started.insert(r.session_id).second;
    if (!later_turn) CHECK(allowed.count({static_cast<int>(r.prompt.size()), r.max_output_tokens}) == 1);
  }
  REQUIRE(outputs.size() == 4);
  for (const auto& [o, count] : outputs) {
    INFO("output " << o);
    CHECK(count / 4000.0 == Approx(0.25).margin(0.04));  // rows drawn uniformly
  }
  // A shared request keeps the row's length: the system prompt is its head
  // (min(64, length - 1) tokens), the rest its own. Rows of 40 tokens share 39.
  const Request* first_turn = nullptr;
  for (const auto& r : requests)
    if (r.session_id >= 0 && r.prompt.size() == 300) first_turn = first_turn ? first_turn : &r;
  REQUIRE(first_turn != nullptr);
  int short_shared = 0;
  for (const auto& r : requests)
    if (r.session_id < 0 && r.prompt.size() == 40) {
      const size_t common = common_prefix(r.prompt, first_turn->prompt);
      CHECK((common == 39 || common < 16));
      short_shared += common == 39;
    }
  CHECK(short_shared > 100);
  const TraceProfile p = read_trace_profile(trace, "azure", "workload.profile_trace");
  CHECK(p.input_tokens == std::vector<int32_t>{100, 40, 300, 70});
  CHECK(p.output_tokens == std::vector<int32_t>{5, 9, 2, 30});
  REQUIRE(p.gaps_s.size() == 3);
  CHECK(p.gaps_s[0] == Approx(1.0));
  CHECK(p.gaps_s[2] == Approx(2.0));
}

TEST_CASE("mix arrival trace replays the profile's gaps scaled to the rate", "[traces][mix]") {
  ScratchDir dir("mix_gaps");
  // Gaps 1, 1, 7 s: mean 3 s. At 20 requests/s without conversations the
  // gaps become 1/60, 1/60, 7/60 s, cycled.
  const std::string trace = dir.write("azure.csv", azure_trace({{0, 50, 4}, {1, 50, 4}, {2, 50, 4}, {9, 50, 4}}));
  const auto requests = drain(mix(10, {{"workload.profile_trace", trace},
                                       {"workload.arrival", "trace"},
                                       {"workload.rate", "20"},
                                       {"workload.share_chat", "0"}}));
  REQUIRE(requests.size() == 10);
  const double expected_gaps[] = {1.0 / 60, 1.0 / 60, 7.0 / 60};
  for (size_t i = 1; i < requests.size(); ++i) {
    INFO("request " << i);
    CHECK(requests[i].arrival_s - requests[i - 1].arrival_s == Approx(expected_gaps[(i - 1) % 3]).margin(1e-9));
  }
}

TEST_CASE("mix rejects impossible settings naming the key", "[traces][mix]") {
  CHECK_THAT(config_error_of([] { mix(10, {{"workload.share_chat", "0.7"}}).validate(); }),
             Catch::Contains("workload.share_chat") && Catch::Contains("at most 1"));
  CHECK_THAT(config_error_of([] { drain(mix(10, {{"workload.arrival", "trace"}})); }),
             Catch::Contains("workload.arrival") && Catch::Contains("workload.profile_trace"));
  CHECK_THAT(config_error_of([] {
               WorkloadConfig c;
               set_options(c, {{"workload.kind", "shared_prefix"}, {"workload.arrival", "trace"}});
               c.validate();
             }),
             Catch::Contains("workload.arrival") && Catch::Contains("only workload.kind = mix"));
  CHECK_THAT(config_error_of([] { drain(mix(10, {{"workload.profile_trace", "/nonexistent/trace.csv"}})); }),
             Catch::Contains("workload.profile_trace") && Catch::Contains("/nonexistent/trace.csv"));
  ScratchDir dir("mix_bad");
  const std::string bad = dir.write("bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0,12,3\n"
                                               "2023-11-16 18:00:01.0,x,3\n");
  CHECK_THAT(config_error_of([&] { drain(mix(10, {{"workload.profile_trace", bad}})); }),
             Catch::Contains(bad + ":3"));
  const std::string instant = dir.write("instant.csv", azure_trace({{0, 10, 2}, {0, 10, 2}}));
  CHECK_THAT(config_error_of([&] {
               drain(mix(10, {{"workload.profile_trace", instant}, {"workload.arrival", "trace"}}));
             }),
             Catch::Contains("arrive at one instant"));
}
