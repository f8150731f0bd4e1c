// The semantic workload: deterministic per seed, unit embeddings, the
// exact-repeat share and the class shares the keys ask for (statistical tests
// with bounds from the binomial and chi-square), paraphrases of one intent
// nearer than different intents, bounded wordings, and its keys.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>

#include "support/chi_square.h"
#include "trace_test_util.h"

using namespace testbed;
using namespace testbed::test;

namespace {

WorkloadConfig semantic(int64_t n, const std::vector<std::pair<std::string, std::string>>& keys = {}) {
  WorkloadConfig c;
  c.kind.name = "semantic";
  c.num_requests = n;
  c.rate = 50.0;
  c.output_tokens = 8;
  set_options(c, {{"workload.prompt_tokens", "16"}, {"workload.embedding_dim", "32"}});
  set_options(c, keys);
  c.validate();
  return c;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0;
  for (size_t i = 0; i < a.size(); ++i) dot += double{a[i]} * b[i];
  return dot;  // unit vectors
}

}  // namespace

TEST_CASE("semantic workload is deterministic per seed", "[semantic_workload]") {
  WorkloadConfig c = semantic(500, {{"workload.intent_clusters", "5"}, {"workload.class_weights", "1,2"}});
  const auto a = drain(c), b = drain(c);
  REQUIRE(a.size() == 500);
  REQUIRE(b.size() == a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].id == static_cast<int64_t>(i));
    CHECK(a[i].prompt == b[i].prompt);
    CHECK(a[i].embedding == b[i].embedding);  // bit for bit
    CHECK(a[i].intent == b[i].intent);
    CHECK(a[i].request_class == b[i].request_class);
    CHECK(a[i].arrival_s == b[i].arrival_s);
    CHECK(a[i].max_output_tokens == 8);
    CHECK(a[i].prompt.size() == 16);
  }
  CHECK(c.max_sequence_tokens() == 24);
  c.seed = 2;
  const auto other = drain(c);
  CHECK(other[0].prompt != a[0].prompt);
  CHECK(other[0].embedding != a[0].embedding);
}

TEST_CASE("semantic workload embeddings are unit norm and intents and classes are in range", "[semantic_workload]") {
  const auto requests = drain(semantic(2000, {{"workload.num_intents", "50"}, {"workload.class_weights", "1,1,1"}}));
  for (const Request& r : requests) {
    REQUIRE(r.embedding.size() == 32);
    double sum = 0;
    for (float x : r.embedding) sum += double{x} * x;
    CHECK(std::sqrt(sum) == Approx(1.0).margin(1e-6));
    CHECK(r.intent >= 0);
    CHECK(r.intent < 50);
    CHECK(r.request_class >= 0);
    CHECK(r.request_class < 3);
    for (int32_t t : r.prompt) CHECK((t >= 0 && t < 32000));
  }
}

TEST_CASE("semantic workload repeats a wording exactly with probability exact_repeat", "[semantic_workload]") {
  for (double p : {0.0, 0.3, 0.7}) {
    INFO("exact_repeat " << p);
    const auto requests = drain(semantic(20000, {{"workload.num_intents", "500"},
                                                 {"workload.exact_repeat", std::to_string(p)}}));
    // A request whose intent was asked before is a Bernoulli(p) repeat; a
    // first question never is. A new wording's random tokens never equal an old one's.
    std::set<int64_t> asked;
    std::set<std::vector<int32_t>> seen;
    std::map<int64_t, std::set<std::vector<int32_t>>> wordings;
    int64_t eligible = 0, repeats = 0;
    for (const Request& r : requests) {
      if (asked.count(r.intent)) ++eligible;
      else CHECK(!seen.count(r.prompt));
      repeats += seen.count(r.prompt);
      asked.insert(r.intent);
      seen.insert(r.prompt);
      wordings[r.intent].insert(r.prompt);
    }
    // Within 5 standard deviations of the binomial mean (a false failure has probability < 1e-6).
    const double mean = eligible * p, sd = std::sqrt(eligible * p * (1 - p));
    CHECK(std::abs(repeats - mean) <= 5 * sd + 1e-9);
    if (p == 0) CHECK(repeats == 0);
    CHECK(eligible > 19000);
  }
}

TEST_CASE("semantic workload draws each intent's class from class_weights", "[semantic_workload]") {
  const std::vector<float> weights = {0.5f, 0.3f, 0.2f};
  const auto requests = drain(semantic(30000, {{"workload.num_intents", "4000"},
                                               {"workload.intent_zipf", "0"},
                                               {"workload.class_weights", "0.5, 0.3,0.2"}}));
  std::map<int64_t, int> class_of;
  for (const Request& r : requests) {
    const auto [it, fresh] = class_of.emplace(r.intent, r.request_class);
    CHECK(it->second == r.request_class);  // one class per intent
  }
  std::vector<int> counts(3, 0);
  for (const auto& [intent, k] : class_of) ++counts[k];
  const int n = static_cast<int>(class_of.size());
  REQUIRE(n > 3500);
  int dof = 0;
  const double stat = chi_square(counts, weights.data(), n, &dof);
  CHECK(dof == 2);
  CHECK(stat < chi_square_critical_999(dof));
  // Zero weights are never drawn.
  for (const Request& r : drain(semantic(500, {{"workload.class_weights", "0,1,0"}}))) CHECK(r.request_class == 1);
}

TEST_CASE("semantic workload paraphrases of one intent are nearer than different intents", "[semantic_workload]") {
  for (const char* clusters : {"0", "10"}) {
    INFO("intent_clusters " << clusters);
    const auto requests = drain(semantic(3000, {{"workload.num_intents", "100"},
                                                {"workload.exact_repeat", "0"},
                                                {"workload.paraphrase_noise", "0.3"},
                                                {"workload.intent_clusters", clusters}}));
    double same = 0, other = 0;
    int64_t num_same = 0, num_other = 0;
    for (size_t i = 0; i < requests.size(); i += 3)
      for (size_t j = i + 1; j < requests.size(); j += 7) {
        const double c = cosine(requests[i].embedding, requests[j].embedding);
        if (requests[i].intent == requests[j].intent) same += c, ++num_same;
        else other += c, ++num_other;
      }
    REQUIRE(num_same > 100);
    same /= num_same;
    other /= num_other;
    // RMS noise 0.3: two wordings' cosine is about 1 / (1 + 0.09).
    CHECK(same == Approx(1.0 / 1.09).margin(0.03));
    CHECK(same > other + 0.5);
    if (std::string(clusters) == "0") CHECK(std::abs(other) < 0.05);  // independent random directions
  }
  // Topics put their intents near each other: intents of a topic at ~1 / (1 + spread^2).
  const auto tight = drain(semantic(2000, {{"workload.num_intents", "40"}, {"workload.intent_clusters", "1"},
                                           {"workload.topic_spread", "0.5"}, {"workload.paraphrase_noise", "0"}}));
  for (size_t i = 1; i < tight.size(); ++i)
    if (tight[i].intent != tight[0].intent) CHECK(cosine(tight[0].embedding, tight[i].embedding) > 0.4);
}

TEST_CASE("semantic workload keeps at most 8 wordings per intent", "[semantic_workload]") {
  // One intent: every exact repeat is one of the last 8 new wordings.
  const auto requests = drain(semantic(400, {{"workload.num_intents", "1"}, {"workload.exact_repeat", "0.5"}}));
  std::vector<std::vector<int32_t>> fresh;  // new wordings in order
  for (const Request& r : requests) {
    auto it = std::find(fresh.begin(), fresh.end(), r.prompt);
    if (it == fresh.end()) {
      fresh.push_back(r.prompt);
      continue;
    }
    CHECK(fresh.end() - it <= 8);
  }
  CHECK(fresh.size() > 150);
}

TEST_CASE("semantic workload keys are validated and errors name the key", "[semantic_workload]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"workload.num_intents", "0"},      {"workload.intent_zipf", "-1"},     {"workload.exact_repeat", "1.1"},
      {"workload.embedding_dim", "0"},    {"workload.paraphrase_noise", "-0.1"}, {"workload.intent_clusters", "-1"},
      {"workload.topic_spread", "-1"},    {"workload.prompt_tokens", "0"},    {"workload.class_weights", "0.5,x"},
      {"workload.class_weights", "0,0"},  {"workload.class_weights", "1,-1"}, {"workload.class_weights", ""}};
  for (const auto& [key, value] : bad) {
    INFO(key << " = " << value);
    const std::string error = config_error_of([&] { semantic(10, {{key, value}}); });
    CHECK(error.rfind(key + ":", 0) == 0);
  }
}
