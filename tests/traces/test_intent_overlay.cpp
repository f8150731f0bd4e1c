// The intent overlay (workload.intents = overlay, traces/intents.h) on traces
// and generators: the inner source's arrivals, lengths and draws unchanged,
// intents and classes in range, unit embeddings, exact repeats that copy an
// earlier wording of the same intent (share within a binomial bound), at most
// 8 wordings per intent, determinism, and its keys. The intent model it shares
// with workload.kind = semantic: that generator's requests match a golden
// file written before the refactor.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "trace_test_util.h"

using namespace testbed;
using namespace testbed::test;

namespace {

uint64_t fnv1a(const void* data, size_t size, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// One line per request: id, arrival (hex float), intent, class, prompt length
// and hash, embedding length and hash (of the floats' bits), bit for bit.
std::string fingerprint(const std::vector<Request>& requests) {
  std::ostringstream out;
  for (const Request& r : requests) {
    char line[256];
    std::snprintf(line, sizeof line, "%lld %a %lld %d %zu %016llx %zu %016llx\n", static_cast<long long>(r.id),
                  r.arrival_s, static_cast<long long>(r.intent), r.request_class, r.prompt.size(),
                  static_cast<unsigned long long>(fnv1a(r.prompt.data(), r.prompt.size() * sizeof(int32_t))),
                  r.embedding.size(),
                  static_cast<unsigned long long>(fnv1a(r.embedding.data(), r.embedding.size() * sizeof(float))));
    out << line;
  }
  return out.str();
}

using Keys = std::vector<std::pair<std::string, std::string>>;

std::string sample(const std::string& file) { return std::string(TESTBED_SOURCE_DIR) + "/traces/samples/" + file; }

WorkloadConfig azure(const Keys& keys = {}) {
  WorkloadConfig c = trace_config("azure", sample("azure2023_conv_head300.csv"));
  set_options(c, keys);
  return c;
}

WorkloadConfig mooncake(const Keys& keys = {}) {
  WorkloadConfig c = trace_config("mooncake", sample("mooncake_conversation_head300.jsonl"));
  set_options(c, keys);
  return c;
}

// Unique prompts (a short shared system prompt + a fresh user message), many requests.
WorkloadConfig shared_prefix(int64_t n, const Keys& keys = {}) {
  WorkloadConfig c;
  set_options(c, {{"workload.kind", "shared_prefix"},
                  {"workload.num_requests", std::to_string(n)},
                  {"workload.rate", "20"},
                  {"workload.output_tokens", "4"},
                  {"workload.system_prompt_tokens", "8"},
                  {"workload.user_tokens", "8"}});
  set_options(c, keys);
  return c;
}

WorkloadConfig with(WorkloadConfig c, const Keys& keys) {
  set_options(c, keys);
  return c;
}

// For each request, the earlier request whose wording it repeats (-1: a new
// wording). A new wording's embedding is a fresh Gaussian draw, so equal
// embeddings mean a repeat.
std::vector<int64_t> repeated_from(const std::vector<Request>& requests) {
  std::vector<int64_t> from(requests.size(), -1);
  std::map<std::vector<float>, int64_t> first_with;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto [it, fresh] = first_with.emplace(requests[i].embedding, static_cast<int64_t>(i));
    if (!fresh) from[i] = it->second;
  }
  return from;
}

}  // namespace

TEST_CASE("the intent overlay keeps a trace's requests and gives them intents", "[intent_overlay]") {
  const Keys keys = {{"workload.intents", "overlay"},     {"workload.num_intents", "20"},
                     {"workload.exact_repeat", "0.5"},    {"workload.embedding_dim", "16"},
                     {"workload.class_weights", "1,1,1"}, {"workload.intent_clusters", "4"}};
  for (const auto& [format, plain] : {std::pair{"azure", azure()}, std::pair{"mooncake", mooncake()}}) {
    INFO(format);
    const auto off = drain(plain), on = drain(with(plain, keys));
    REQUIRE(on.size() == 300);
    REQUIRE(off.size() == on.size());
    const auto from = repeated_from(on);
    int64_t num_repeats = 0;
    for (size_t i = 0; i < on.size(); ++i) {
      INFO("request " << i);
      const Request& r = on[i];
      CHECK(off[i].intent == -1);
      CHECK(off[i].embedding.empty());
      CHECK(r.id == off[i].id);
      CHECK(r.arrival_s == off[i].arrival_s);
      CHECK(r.max_output_tokens == off[i].max_output_tokens);
      CHECK(r.priority == off[i].priority);
      CHECK(r.intent >= 0);
      CHECK(r.intent < 20);
      CHECK(r.request_class >= 0);
      CHECK(r.request_class < 3);
      REQUIRE(r.embedding.size() == 16);
      double sum = 0;
      for (float x : r.embedding) sum += double{x} * x;
      CHECK(std::sqrt(sum) == Approx(1.0).margin(1e-6));
      CHECK(r.prompt.capacity() >= r.prompt.size() + static_cast<size_t>(r.max_output_tokens));
      if (from[i] < 0) {
        CHECK(r.prompt == off[i].prompt);  // a new wording is the trace's own prompt
        continue;
      }
      ++num_repeats;
      const Request& earlier = on[static_cast<size_t>(from[i])];
      CHECK(earlier.intent == r.intent);
      CHECK(earlier.request_class == r.request_class);
      CHECK(r.prompt == earlier.prompt);
    }
    CHECK(num_repeats > 100);
  }
}

TEST_CASE("the intent overlay repeats a wording exactly with probability exact_repeat", "[intent_overlay]") {
  for (double p : {0.0, 0.3, 0.8}) {
    INFO("exact_repeat " << p);
    const auto requests = drain(shared_prefix(20000, {{"workload.intents", "overlay"},
                                                      {"workload.num_intents", "500"},
                                                      {"workload.exact_repeat", std::to_string(p)}}));
    const auto from = repeated_from(requests);
    // A request whose intent was asked before is a Bernoulli(p) repeat; a first question never is.
    std::set<int64_t> asked;
    int64_t eligible = 0, repeats = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const bool repeat = from[i] >= 0;
      if (asked.count(requests[i].intent)) ++eligible;
      else CHECK(!repeat);
      repeats += repeat;
      asked.insert(requests[i].intent);
    }
    // Within 5 standard deviations of the binomial mean (a false failure has probability < 1e-6).
    const double mean = eligible * p, sd = std::sqrt(eligible * p * (1 - p));
    CHECK(std::abs(repeats - mean) <= 5 * sd + 1e-9);
    if (p == 0) CHECK(repeats == 0);
    CHECK(eligible > 19000);
  }
}

TEST_CASE("the intent overlay keeps at most 8 wordings per intent", "[intent_overlay]") {
  // One intent: every exact repeat is one of the last 8 new wordings.
  const auto requests = drain(shared_prefix(400, {{"workload.intents", "overlay"},
                                                  {"workload.num_intents", "1"},
                                                  {"workload.exact_repeat", "0.5"}}));
  const auto from = repeated_from(requests);
  std::vector<size_t> fresh;  // new wordings in order
  for (size_t i = 0; i < requests.size(); ++i) {
    if (from[i] < 0) {
      fresh.push_back(i);
      continue;
    }
    const auto it = std::find(fresh.begin(), fresh.end(), static_cast<size_t>(from[i]));
    REQUIRE(it != fresh.end());
    CHECK(fresh.end() - it <= 8);
  }
  CHECK(fresh.size() > 150);
}

TEST_CASE("the intent overlay is deterministic and never changes the inner source's draws", "[intent_overlay]") {
  const Keys keys = {{"workload.intents", "overlay"}, {"workload.num_intents", "50"}, {"workload.exact_repeat", "0.4"}};
  // Cancellations wrap the overlay, so their draws stay those of the plain source too.
  const WorkloadConfig plain = shared_prefix(2000, {{"workload.num_priorities", "3"},
                                                    {"workload.cancel_fraction", "0.3"}});
  const WorkloadConfig overlaid = with(plain, keys);
  const auto off = drain(plain), a = drain(overlaid), b = drain(overlaid);
  REQUIRE(a.size() == 2000);
  REQUIRE(b.size() == a.size());
  REQUIRE(off.size() == a.size());
  CHECK(fingerprint(a) == fingerprint(b));
  const auto from = repeated_from(a);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].prompt == b[i].prompt);
    CHECK(a[i].embedding == b[i].embedding);  // bit for bit
    CHECK(a[i].arrival_s == off[i].arrival_s);
    CHECK(a[i].max_output_tokens == off[i].max_output_tokens);
    CHECK(a[i].priority == off[i].priority);
    CHECK(a[i].cancel_after_s == off[i].cancel_after_s);
    if (from[i] < 0) CHECK(a[i].prompt == off[i].prompt);
  }
  // Another seed: other intents (and, as always, other inner draws).
  const auto other = drain(with(overlaid, {{"workload.seed", "2"}}));
  CHECK(fingerprint(other) != fingerprint(a));
}

TEST_CASE("the intent overlay's keys are validated and errors name the key", "[intent_overlay]") {
  // One key, bound once, read by the semantic kind and the overlay alike.
  OptionTable t;
  WorkloadConfig c;
  c.bind(t);
  CHECK(t.contains("workload.intents"));
  CHECK(t.value("workload.intents") == "none");
  t.set("workload.num_intents", "7");
  CHECK(c.intents.num_intents == 7);

  const auto error_of = [](const WorkloadConfig& w) { return config_error_of([&] { drain(w); }); };
  WorkloadConfig semantic;
  set_options(semantic, {{"workload.kind", "semantic"}, {"workload.num_requests", "5"}});
  CHECK(error_of(semantic).empty());
  CHECK(error_of(with(semantic, {{"workload.intents", "overlay"}})).rfind("workload.intents:", 0) == 0);
  CHECK(error_of(with(semantic, {{"workload.intents", "none"}})).empty());
  CHECK(error_of(azure({{"workload.intents", "yes"}})).rfind("workload.intents:", 0) == 0);
  const Keys bad = {{"workload.num_intents", "0"},     {"workload.intent_zipf", "-1"},
                    {"workload.exact_repeat", "1.1"},  {"workload.embedding_dim", "0"},
                    {"workload.paraphrase_noise", "-0.1"}, {"workload.intent_clusters", "-1"},
                    {"workload.topic_spread", "-1"},   {"workload.class_weights", "0,0"}};
  for (const auto& [key, value] : bad) {
    INFO(key << " = " << value);
    CHECK(error_of(azure({{"workload.intents", "overlay"}, {key, value}})).rfind(key + ":", 0) == 0);
  }
}

TEST_CASE("the semantic generator reproduces its golden requests", "[intent_overlay][golden]") {
  // Written before the intent machinery moved to traces/intents.cpp; regenerate
  // (TESTBED_REGENERATE_GOLDEN=1) only when a change is meant to alter the draws.
  std::string got;
  for (const auto& keys : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {},
           {{"workload.num_intents", "20"},
            {"workload.exact_repeat", "0.4"},
            {"workload.intent_clusters", "3"},
            {"workload.topic_spread", "0.3"},
            {"workload.paraphrase_noise", "0.2"},
            {"workload.embedding_dim", "16"},
            {"workload.prompt_tokens", "24"},
            {"workload.class_weights", "0.5,0.3,0.2"},
            {"workload.seed", "7"}}}) {
    WorkloadConfig c;
    set_options(c, {{"workload.kind", "semantic"}, {"workload.num_requests", "50"}, {"workload.rate", "10"}});
    set_options(c, keys);
    got += fingerprint(drain(c));
  }
  const std::string path = std::string(TESTBED_SOURCE_DIR) + "/tests/traces/golden/semantic_requests.txt";
  if (std::getenv("TESTBED_REGENERATE_GOLDEN")) std::ofstream(path) << got;
  std::ifstream in(path);
  REQUIRE(in);
  std::stringstream want;
  want << in.rdbuf();
  CHECK(got == want.str());
}
