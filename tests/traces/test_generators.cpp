// Synthetic generators: determinism per seed, the prefix structure each kind
// promises (multi_turn history, rag documents, llmd customer prefixes), rates,
// max_sequence_tokens, and the workload.* / trace.* keys.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "engine/common/option_table.h"
#include "trace_test_util.h"
#include "traces/random_tokens.h"

using namespace testbed;
using namespace testbed::test;

namespace {

// The small shape every generator test uses; small() writes it into the config's keys.
struct Shape {
  int system_prompt_tokens = 48, user_tokens = 20, output_tokens = 12, turns = 4;
  int num_documents = 30, document_tokens = 32, documents_per_request = 3;
  int num_customers = 6, users_per_customer = 3, prefix_tokens = 64, query_tokens = 24;
};
const Shape kShape;

WorkloadConfig small(const std::string& kind) {
  WorkloadConfig c;
  c.kind.name = kind;
  c.num_requests = 60;
  c.rate = 10.0;
  c.output_tokens = kShape.output_tokens;
  set_options(c, {{"workload.system_prompt_tokens", std::to_string(kShape.system_prompt_tokens)},
                  {"workload.user_tokens", std::to_string(kShape.user_tokens)},
                  {"workload.turns", std::to_string(kShape.turns)},
                  {"workload.turn_gap_s", "0.5"},
                  {"workload.num_documents", std::to_string(kShape.num_documents)},
                  {"workload.document_tokens", std::to_string(kShape.document_tokens)},
                  {"workload.documents_per_request", std::to_string(kShape.documents_per_request)},
                  {"workload.num_customers", std::to_string(kShape.num_customers)},
                  {"workload.users_per_customer", std::to_string(kShape.users_per_customer)},
                  {"workload.prefix_tokens", std::to_string(kShape.prefix_tokens)},
                  {"workload.query_tokens", std::to_string(kShape.query_tokens)}});
  return c;
}

bool starts_with(const std::vector<int32_t>& v, const std::vector<int32_t>& prefix) {
  return v.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), v.begin());
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

const std::vector<std::string> kGenerators = {"shared_prefix", "multi_turn", "rag", "llmd"};

}  // namespace

TEST_CASE("workload generators are deterministic per seed and differ across seeds", "[traces]") {
  for (const auto& kind : kGenerators) {
    INFO(kind);
    WorkloadConfig c = small(kind);
    const auto a = drain(c), b = drain(c);
    REQUIRE(a.size() == 60);
    REQUIRE(b.size() == a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].id == static_cast<int64_t>(i));
      CHECK(a[i].prompt == b[i].prompt);
      CHECK(a[i].arrival_s == b[i].arrival_s);  // bit for bit
      CHECK(a[i].scripted_output == b[i].scripted_output);
      CHECK(a[i].session_id == b[i].session_id);
      CHECK(a[i].max_output_tokens == 12);
      if (i > 0) CHECK(a[i].arrival_s >= a[i - 1].arrival_s);
    }
    c.seed = 2;
    const auto other = drain(c);
    CHECK(other[0].prompt != a[0].prompt);
    CHECK(other.back().arrival_s != a.back().arrival_s);
  }
}

TEST_CASE("workload max_sequence_tokens bounds every generated sequence exactly", "[traces]") {
  for (const auto& kind : kGenerators) {
    INFO(kind);
    const WorkloadConfig c = small(kind);
    size_t longest = 0;
    for (const auto& r : drain(c)) longest = std::max(longest, r.prompt.size() + r.max_output_tokens);
    CHECK(static_cast<int>(longest) == c.max_sequence_tokens());
  }
  CHECK(trace_config("mooncake", "x").max_sequence_tokens() == 0);
}

TEST_CASE("workload multi_turn turn k+1 extends turn k prompt and scripted answer", "[traces]") {
  const WorkloadConfig c = small("multi_turn");
  const auto requests = drain(c);
  std::map<int64_t, std::vector<const Request*>> sessions;
  for (const auto& r : requests) sessions[r.session_id].push_back(&r);
  CHECK(sessions.size() == 15);  // 60 requests / 4 turns
  const std::vector<int32_t> system(requests[0].prompt.begin(), requests[0].prompt.begin() + kShape.system_prompt_tokens);
  for (const auto& [id, turns] : sessions) {
    INFO("session " << id);
    REQUIRE(turns.size() == 4);
    for (size_t k = 0; k < turns.size(); ++k) {
      const Request& r = *turns[k];
      CHECK(starts_with(r.prompt, system));
      CHECK(r.scripted_output.size() == static_cast<size_t>(c.output_tokens));
      CHECK(r.prompt.size() == kShape.system_prompt_tokens + (k + 1) * kShape.user_tokens + k * c.output_tokens);
      if (k == 0) continue;
      const Request& prev = *turns[k - 1];
      std::vector<int32_t> history = prev.prompt;
      history.insert(history.end(), prev.scripted_output.begin(), prev.scripted_output.end());
      CHECK(starts_with(r.prompt, history));
      CHECK(r.arrival_s >= prev.arrival_s);
    }
  }
  // Two sessions share the system prompt and nothing more.
  CHECK(common_prefix(sessions[0][0]->prompt, sessions[1][0]->prompt) == static_cast<size_t>(kShape.system_prompt_tokens));
}

TEST_CASE("workload multi_turn sessions keep the overall request rate", "[traces]") {
  WorkloadConfig c = small("multi_turn");
  c.num_requests = 40000;
  c.rate = 20.0;
  c.output_tokens = 1;
  set_options(c, {{"workload.turns", "5"},
                  {"workload.turn_gap_s", "2.0"},
                  {"workload.system_prompt_tokens", "1"},
                  {"workload.user_tokens", "1"}});
  WorkloadContext ctx;
  auto source = make_workload(c, ctx);
  double last = 0;
  int64_t n = 0;
  while (auto r = source->next()) {
    last = r->arrival_s;
    ++n;
  }
  REQUIRE(n == c.num_requests);
  // Sessions start at rate / turns; the last turns trail the last start by about
  // (turns - 1) * turn_gap_s, a few seconds of a ~2,000 s run.
  CHECK(n / last == Approx(c.rate).epsilon(0.03));
}

TEST_CASE("workload multi_turn with rate zero puts every turn at t zero", "[traces]") {
  WorkloadConfig c = small("multi_turn");
  c.rate = 0.0;
  for (const auto& r : drain(c)) CHECK(r.arrival_s == 0.0);
}

TEST_CASE("workload rag prompts are system prompt plus pool documents plus question", "[traces]") {
  const WorkloadConfig c = small("rag");
  const auto requests = drain(c);
  const size_t sys = kShape.system_prompt_tokens, d = kShape.document_tokens;
  std::map<std::vector<int32_t>, int> documents;  // content -> times used
  for (const auto& r : requests) {
    REQUIRE(r.prompt.size() == sys + 3 * d + kShape.user_tokens);
    CHECK(std::equal(r.prompt.begin(), r.prompt.begin() + sys, requests[0].prompt.begin()));
    std::set<std::vector<int32_t>> in_request;
    for (size_t k = 0; k < 3; ++k) {
      std::vector<int32_t> doc(r.prompt.begin() + sys + k * d, r.prompt.begin() + sys + (k + 1) * d);
      in_request.insert(doc);
      ++documents[doc];
    }
    CHECK(in_request.size() == 3);  // distinct documents
  }
  CHECK(documents.size() <= static_cast<size_t>(kShape.num_documents));
  int max_uses = 0;
  for (const auto& [doc, uses] : documents) max_uses = std::max(max_uses, uses);
  CHECK(max_uses > 180 / 30 * 2);  // Zipf(1): the top document is drawn far more than the average
  // Requests with the same first document share the system prompt and that document.
  for (size_t i = 1; i < requests.size(); ++i) {
    const size_t shared = common_prefix(requests[0].prompt, requests[i].prompt);
    const bool same_first = std::equal(requests[0].prompt.begin() + sys, requests[0].prompt.begin() + sys + d,
                                       requests[i].prompt.begin() + sys);
    CHECK(shared >= sys);
    CHECK((shared >= sys + d) == same_first);
  }
}

TEST_CASE("workload llmd requests share exactly their customer prefix", "[traces]") {
  WorkloadConfig c = small("llmd");
  for (int user_context : {0, 16}) {
    INFO("user_context_tokens " << user_context);
    set_options(c, {{"workload.user_context_tokens", std::to_string(user_context)}});
    const auto requests = drain(c);
    const size_t prefix = kShape.prefix_tokens, shared_by_user = prefix + user_context;
    std::set<int64_t> sessions;
    for (const auto& r : requests) {
      REQUIRE(r.session_id >= 0);
      REQUIRE(r.session_id < kShape.num_customers * kShape.users_per_customer);
      sessions.insert(r.session_id);
      CHECK(r.prompt.size() == shared_by_user + kShape.query_tokens);
    }
    CHECK(sessions.size() > 10);  // 60 draws over 18 users
    for (size_t i = 0; i < requests.size(); ++i)
      for (size_t j = i + 1; j < requests.size(); ++j) {
        const auto& a = requests[i];
        const auto& b = requests[j];
        const size_t shared = common_prefix(a.prompt, b.prompt);
        const int64_t customer_a = a.session_id / kShape.users_per_customer,
                      customer_b = b.session_id / kShape.users_per_customer;
        if (a.session_id == b.session_id)
          CHECK(shared == shared_by_user);  // queries are unique per request
        else if (customer_a == customer_b)
          CHECK(shared == prefix);
        else
          CHECK(shared == 0);
      }
  }
}

TEST_CASE("workload llmd defaults follow the llm-d benchmark shape", "[traces]") {
  WorkloadConfig c;
  c.kind.name = "llmd";
  OptionTable defaults;
  c.bind(defaults);
  CHECK(defaults.value("workload.num_customers") == "150");
  CHECK(defaults.value("workload.users_per_customer") == "5");
  CHECK(defaults.value("workload.prefix_tokens") == "6000");
  CHECK(defaults.value("workload.query_tokens") == "1200");
  c.num_requests = 3;
  for (const auto& r : drain(c)) CHECK(r.prompt.size() == 7200);
}

TEST_CASE("workload and trace keys are registered and validated by name", "[traces]") {
  WorkloadConfig c;
  OptionTable table;
  c.bind(table);
  std::set<std::string> keys;
  for (const auto& [key, value] : table.resolved()) keys.insert(key);
  for (const char* key :
       {"workload.kind", "workload.turns", "workload.turn_gap_s", "workload.num_documents", "workload.document_tokens",
        "workload.documents_per_request", "workload.zipf_s", "workload.num_customers", "workload.users_per_customer",
        "workload.prefix_tokens", "workload.user_context_tokens", "workload.query_tokens", "trace.format", "trace.path",
        "trace.time_scale", "trace.max_requests", "trace.arrivals", "trace.output_tokens"})
    CHECK(keys.count(key) == 1);

  const auto error_with = [](const std::vector<std::pair<std::string, std::string>>& keys) {
    WorkloadConfig bad;
    set_options(bad, keys);
    return config_error_of([&] { bad.validate(); });
  };
  CHECK_THAT(error_with({{"workload.kind", "sharegpt"}}), Catch::StartsWith("workload.kind: "));
  CHECK_THAT(error_with({{"workload.turns", "0"}}), Catch::StartsWith("workload.turns: "));
  CHECK_THAT(error_with({{"workload.documents_per_request", "2000"}}),
             Catch::StartsWith("workload.documents_per_request: "));
  CHECK_THAT(error_with({{"workload.zipf_s", "-1"}}), Catch::StartsWith("workload.zipf_s: "));
  CHECK_THAT(error_with({{"workload.users_per_customer", "0"}}), Catch::StartsWith("workload.users_per_customer: "));
  CHECK_THAT(error_with({{"trace.time_scale", "0"}}), Catch::StartsWith("trace.time_scale: "));
  CHECK_THAT(error_with({{"trace.arrivals", "bursty"}}), Catch::StartsWith("trace.arrivals: "));
  CHECK_THAT(error_with({{"trace.max_requests", "-1"}}), Catch::StartsWith("trace.max_requests: "));
  CHECK_THAT(error_with({{"trace.output_tokens", "-1"}}), Catch::StartsWith("trace.output_tokens: "));
  CHECK_THAT(error_with({{"workload.kind", "multi_turn"}, {"workload.turns", "1048576"}, {"workload.user_tokens", "4096"}}),
             Catch::StartsWith("workload.kind: "));
}

TEST_CASE("workload.num_priorities draws priorities without changing any other draw", "[traces]") {
  for (const auto& kind : kGenerators) {
    INFO(kind);
    WorkloadConfig c = small(kind);
    const auto plain = drain(c);
    for (const auto& r : plain) CHECK(r.priority == 0);
    c.num_priorities = 3;
    const auto ranked = drain(c), again = drain(c);
    REQUIRE(ranked.size() == plain.size());
    int count[3] = {0, 0, 0};
    for (size_t i = 0; i < ranked.size(); ++i) {
      REQUIRE(ranked[i].priority >= 0);
      REQUIRE(ranked[i].priority < 3);
      ++count[ranked[i].priority];
      CHECK(ranked[i].priority == again[i].priority);  // seeded
      CHECK(ranked[i].prompt == plain[i].prompt);      // its own seed stream
      CHECK(ranked[i].arrival_s == plain[i].arrival_s);
    }
    for (int n : count) CHECK(n > 5);  // 60 draws over 3 levels
  }
  WorkloadConfig bad = small("shared_prefix");
  bad.num_priorities = 0;
  CHECK_THAT(config_error_of([&] { bad.validate(); }), Catch::StartsWith("workload.num_priorities"));
}

TEST_CASE("append_random_tokens draws what Rng::below draws, token by token, and leaves the Rng where it would", "[traces]") {
  // Lengths around the vector loop's width and the 512-token chunk; vocabularies
  // from tiny to the largest int. append_random_tokens runs the copy this CPU
  // picks; both copies are checked directly below.
  for (const int vocab : {1, 7, 32000, 128256, 2147483647})
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{511}, int64_t{512},
                            int64_t{513}, int64_t{1500}}) {
      Rng bulk(mix_seed(42, static_cast<uint64_t>(vocab) * 1000 + static_cast<uint64_t>(n)));
      Rng one = bulk;
      const uint64_t start = bulk.state();
      std::vector<int32_t> got = {-1};  // appended after what is there
      append_random_tokens(got, bulk, n, vocab);
      REQUIRE(got.size() == static_cast<size_t>(n) + 1);
      CHECK(got[0] == -1);
      std::vector<int32_t> portable(static_cast<size_t>(n) + 1, -2), v4(static_cast<size_t>(n) + 1, -2);
      uniform_tokens_portable(start, n, vocab, portable.data());
      uniform_tokens_v4(start, n, vocab, v4.data());
      CHECK(portable[static_cast<size_t>(n)] == -2);  // nothing written past n
      CHECK(v4[static_cast<size_t>(n)] == -2);
      for (int64_t i = 0; i < n; ++i) {
        const auto want = static_cast<int32_t>(one.below(static_cast<uint64_t>(vocab)));
        const size_t k = static_cast<size_t>(i);
        if (got[k + 1] != want || portable[k] != want || v4[k] != want)
          FAIL("token " << i << " of " << n << " (vocab " << vocab << "): " << got[k + 1] << ", " << portable[k]
                        << ", " << v4[k] << " against " << want);
        REQUIRE((got[k + 1] >= 0 && got[k + 1] < vocab));
      }
      CHECK(bulk.next_u64() == one.next_u64());
    }
  if (!uniform_tokens_v4_available()) WARN("no AVX-512 here: uniform_tokens_v4 ran its portable copy");
}
