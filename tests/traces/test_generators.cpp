// Synthetic generators: determinism per seed, the prefix structure each kind
// promises (multi_turn history, rag documents, llmd customer prefixes), rates,
// max_sequence_tokens, and the workload.* / trace.* keys.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "experiments/cli/option_table.h"
#include "trace_test_util.h"

using namespace testbed;
using namespace testbed::test;

namespace {

WorkloadConfig small(const std::string& kind) {
  WorkloadConfig c;
  c.kind = kind;
  c.num_requests = 60;
  c.rate = 10.0;
  c.system_prompt_tokens = 48;
  c.user_tokens = 20;
  c.output_tokens = 12;
  c.turns = 4;
  c.turn_gap_s = 0.5;
  c.num_documents = 30;
  c.document_tokens = 32;
  c.documents_per_request = 3;
  c.num_customers = 6;
  c.users_per_customer = 3;
  c.prefix_tokens = 64;
  c.query_tokens = 24;
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
  const std::vector<int32_t> system(requests[0].prompt.begin(), requests[0].prompt.begin() + c.system_prompt_tokens);
  for (const auto& [id, turns] : sessions) {
    INFO("session " << id);
    REQUIRE(turns.size() == 4);
    for (size_t k = 0; k < turns.size(); ++k) {
      const Request& r = *turns[k];
      CHECK(starts_with(r.prompt, system));
      CHECK(r.scripted_output.size() == static_cast<size_t>(c.output_tokens));
      CHECK(r.prompt.size() == c.system_prompt_tokens + (k + 1) * c.user_tokens + k * c.output_tokens);
      if (k == 0) continue;
      const Request& prev = *turns[k - 1];
      std::vector<int32_t> history = prev.prompt;
      history.insert(history.end(), prev.scripted_output.begin(), prev.scripted_output.end());
      CHECK(starts_with(r.prompt, history));
      CHECK(r.arrival_s >= prev.arrival_s);
    }
  }
  // Two sessions share the system prompt and nothing more.
  CHECK(common_prefix(sessions[0][0]->prompt, sessions[1][0]->prompt) == static_cast<size_t>(c.system_prompt_tokens));
}

TEST_CASE("workload multi_turn sessions keep the overall request rate", "[traces]") {
  WorkloadConfig c = small("multi_turn");
  c.num_requests = 40000;
  c.rate = 20.0;
  c.turns = 5;
  c.turn_gap_s = 2.0;
  c.system_prompt_tokens = 1;
  c.user_tokens = 1;
  c.output_tokens = 1;
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
  const size_t sys = c.system_prompt_tokens, d = c.document_tokens;
  std::map<std::vector<int32_t>, int> documents;  // content -> times used
  for (const auto& r : requests) {
    REQUIRE(r.prompt.size() == sys + 3 * d + c.user_tokens);
    CHECK(std::equal(r.prompt.begin(), r.prompt.begin() + sys, requests[0].prompt.begin()));
    std::set<std::vector<int32_t>> in_request;
    for (size_t k = 0; k < 3; ++k) {
      std::vector<int32_t> doc(r.prompt.begin() + sys + k * d, r.prompt.begin() + sys + (k + 1) * d);
      in_request.insert(doc);
      ++documents[doc];
    }
    CHECK(in_request.size() == 3);  // distinct documents
  }
  CHECK(documents.size() <= static_cast<size_t>(c.num_documents));
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
    c.user_context_tokens = user_context;
    const auto requests = drain(c);
    const size_t prefix = c.prefix_tokens, shared_by_user = prefix + user_context;
    std::set<int64_t> sessions;
    for (const auto& r : requests) {
      REQUIRE(r.session_id >= 0);
      REQUIRE(r.session_id < c.num_customers * c.users_per_customer);
      sessions.insert(r.session_id);
      CHECK(r.prompt.size() == shared_by_user + c.query_tokens);
    }
    CHECK(sessions.size() > 10);  // 60 draws over 18 users
    for (size_t i = 0; i < requests.size(); ++i)
      for (size_t j = i + 1; j < requests.size(); ++j) {
        const auto& a = requests[i];
        const auto& b = requests[j];
        const size_t shared = common_prefix(a.prompt, b.prompt);
        const int64_t customer_a = a.session_id / c.users_per_customer,
                      customer_b = b.session_id / c.users_per_customer;
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
  c.kind = "llmd";
  CHECK(c.num_customers == 150);
  CHECK(c.users_per_customer == 5);
  CHECK(c.prefix_tokens == 6000);
  CHECK(c.query_tokens == 1200);
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

  const auto error_with = [](auto edit) {
    WorkloadConfig bad;
    edit(bad);
    return config_error_of([&] { bad.validate(); });
  };
  CHECK_THAT(error_with([](WorkloadConfig& w) { w.kind = "sharegpt"; }), Catch::StartsWith("workload.kind: "));
  CHECK_THAT(error_with([](WorkloadConfig& w) { w.turns = 0; }), Catch::StartsWith("workload.turns: "));
  CHECK_THAT(error_with([](WorkloadConfig& w) { w.documents_per_request = 2000; }),
             Catch::StartsWith("workload.documents_per_request: "));
  CHECK_THAT(error_with([](WorkloadConfig& w) { w.zipf_s = -1; }), Catch::StartsWith("workload.zipf_s: "));
  CHECK_THAT(error_with([](WorkloadConfig& w) { w.users_per_customer = 0; }),
             Catch::StartsWith("workload.users_per_customer: "));
  CHECK_THAT(error_with([](WorkloadConfig& w) { w.trace.time_scale = 0; }), Catch::StartsWith("trace.time_scale: "));
  CHECK_THAT(error_with([](WorkloadConfig& w) { w.trace.arrivals = "bursty"; }), Catch::StartsWith("trace.arrivals: "));
  CHECK_THAT(error_with([](WorkloadConfig& w) { w.trace.max_requests = -1; }),
             Catch::StartsWith("trace.max_requests: "));
  CHECK_THAT(error_with([](WorkloadConfig& w) { w.trace.output_tokens = -1; }),
             Catch::StartsWith("trace.output_tokens: "));
  CHECK_THAT(error_with([](WorkloadConfig& w) {
               w.kind = "multi_turn";
               w.turns = 1 << 20;
               w.user_tokens = 1 << 12;
             }),
             Catch::StartsWith("workload.kind: "));
}
