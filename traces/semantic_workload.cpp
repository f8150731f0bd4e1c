// semantic: questions that repeat, exactly or paraphrased, for a semantic
// response cache (sim/semantic_cache.h). There are workload.num_intents
// distinct questions (intents) of Zipf(workload.intent_zipf) popularity. Each
// request draws an intent; with probability workload.exact_repeat, and if the
// intent was asked before, it repeats one of the intent's earlier wordings
// exactly (same tokens, same embedding); otherwise it is a new wording: fresh
// random tokens and a paraphrase embedding, the intent's unit centroid plus
// Gaussian noise of RMS norm workload.paraphrase_noise, renormalised (so two
// wordings have cosine about 1 / (1 + noise^2) in any dimension). With
// workload.intent_clusters > 0 the intents are grouped in topics: an intent's
// centroid is its topic's plus noise of RMS norm workload.topic_spread,
// renormalised, so intents of one topic are near (the false hits a low
// threshold makes); 0 gives independent random centroids. Each intent draws a
// difficulty class once, from workload.class_weights.
//
// Sets Request.intent, .embedding (unit norm) and .request_class. Intents are
// built on first use from (seed, intent): no table of centroids is held, and
// each intent keeps at most kMaxWordings wordings (the oldest replaced).
// Seed streams: 2 the per-request draws (GeneratedWorkload), 3 the topics,
// 4 the intents.
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "traces/generated_workload.h"
#include "traces/random_tokens.h"
#include "traces/zipf_sampler.h"

namespace testbed {
namespace {

constexpr size_t kMaxWordings = 8;

// "0.5,0.3,0.2" -> {0.5, 0.3, 0.2}; each finite and >= 0, some positive.
std::vector<double> parse_class_weights(const std::string& text) {
  const std::string key = "workload.class_weights";
  std::vector<double> weights;
  double total = 0;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    std::string field = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t b = field.find_first_not_of(" \t"), e = field.find_last_not_of(" \t");
    field = b == std::string::npos ? "" : field.substr(b, e - b + 1);
    double w = 0;
    require(parse_value(field, w) && w >= 0, key, "'" + field + "' is not a weight >= 0 (want e.g. 0.5,0.3,0.2)");
    weights.push_back(w);
    total += w;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  require(total > 0, key, "needs a positive weight");
  return weights;
}

struct SemanticParams : ParamsOf<SemanticParams, WorkloadParams> {
  int64_t num_intents = 1000;
  double intent_zipf = 1.0;
  double exact_repeat = 0.3;
  int embedding_dim = 64;
  double paraphrase_noise = 0.1;
  int intent_clusters = 0;
  double topic_spread = 0.5;
  int prompt_tokens = 200;
  std::string class_weights = "1";
  void bind(OptionTable& t) override {
    t.add("workload.num_intents", &num_intents, "semantic: distinct questions");
    t.add("workload.intent_zipf", &intent_zipf, "semantic: Zipf exponent of question popularity (0 = uniform)");
    t.add("workload.exact_repeat", &exact_repeat,
          "semantic: probability that a request repeats an earlier wording of its question exactly");
    t.add("workload.embedding_dim", &embedding_dim, "semantic: prompt embedding dimension");
    t.add("workload.paraphrase_noise", &paraphrase_noise,
          "semantic: RMS norm of the noise a new wording adds to its question's unit centroid");
    t.add("workload.intent_clusters", &intent_clusters,
          "semantic: topics grouping the questions' centroids (0 = independent centroids)");
    t.add("workload.topic_spread", &topic_spread, "semantic: RMS norm of a question's offset from its topic");
    t.add("workload.prompt_tokens", &prompt_tokens, "semantic: tokens per prompt");
    t.add("workload.class_weights", &class_weights,
          "semantic: comma-separated weights of difficulty classes 0, 1, ... (each question draws one)");
  }
  void validate() const override {
    require(num_intents > 0, "workload.num_intents", "must be positive");
    require(std::isfinite(intent_zipf) && intent_zipf >= 0, "workload.intent_zipf", "must be >= 0 (0 = uniform)");
    require(exact_repeat >= 0 && exact_repeat <= 1, "workload.exact_repeat", "must be in [0, 1]");
    require(embedding_dim > 0, "workload.embedding_dim", "must be positive");
    require(std::isfinite(paraphrase_noise) && paraphrase_noise >= 0, "workload.paraphrase_noise", "must be >= 0");
    require(intent_clusters >= 0, "workload.intent_clusters", "must be >= 0 (0 = no topics)");
    require(std::isfinite(topic_spread) && topic_spread >= 0, "workload.topic_spread", "must be >= 0");
    require(prompt_tokens > 0, "workload.prompt_tokens", "must be positive");
    parse_class_weights(class_weights);
  }
  int64_t max_sequence_tokens(const WorkloadConfig& c) const override {
    return int64_t{prompt_tokens} + c.output_tokens;
  }
};

// v / |v| (v nonzero with overwhelming probability: a Gaussian draw).
void normalise(std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  const double norm = std::sqrt(sum);
  if (norm > 0)
    for (double& x : v) x /= norm;
}

class SemanticWorkload : public GeneratedWorkload {
 public:
  SemanticWorkload(const SemanticParams& p, const WorkloadConfig& c, const WorkloadContext& ctx)
      : GeneratedWorkload(c, ctx),
        p_(p),
        popularity_(p.num_intents, p.intent_zipf),
        class_weights_(parse_class_weights(p.class_weights)),
        intent_seed_(mix_seed(c.seed, 4)) {
    Rng topic_rng(mix_seed(c.seed, 3));
    topics_.resize(static_cast<size_t>(p.intent_clusters));
    for (auto& t : topics_) t = random_unit(topic_rng, 1.0, nullptr);
  }

  void fill(Request& r) override {
    const int64_t intent_id = popularity_.draw(rng_);
    Intent& intent = intent_of(intent_id);
    const bool repeat = rng_.uniform() < p_.exact_repeat;
    r.prompt.reserve(static_cast<size_t>(p_.prompt_tokens) + c_.output_tokens);
    if (repeat && !intent.wordings.empty()) {
      const Wording& w = intent.wordings[rng_.below(intent.wordings.size())];
      r.prompt.assign(w.tokens.begin(), w.tokens.end());
      r.embedding = w.embedding;
    } else {
      Wording w;
      append_random_tokens(w.tokens, rng_, p_.prompt_tokens, ctx_.vocab_size);
      const auto e = random_unit(rng_, p_.paraphrase_noise, &intent.centroid);
      w.embedding.assign(e.begin(), e.end());
      r.prompt.assign(w.tokens.begin(), w.tokens.end());
      r.embedding = w.embedding;
      if (intent.wordings.size() < kMaxWordings) {
        intent.wordings.push_back(std::move(w));
      } else {
        intent.wordings[intent.oldest] = std::move(w);
        intent.oldest = (intent.oldest + 1) % kMaxWordings;
      }
    }
    r.intent = intent_id;
    r.request_class = intent.request_class;
  }

 private:
  struct Wording {
    std::vector<int32_t> tokens;
    std::vector<float> embedding;
  };
  struct Intent {
    std::vector<double> centroid;  // unit
    int request_class = 0;
    std::vector<Wording> wordings;
    size_t oldest = 0;  // the wording a new one replaces once there are kMaxWordings
  };

  // normalise(base + noise * g / sqrt(dim)) with g standard Gaussian per
  // coordinate (base null: zero), so the noise has RMS norm `noise`.
  std::vector<double> random_unit(Rng& rng, double noise, const std::vector<double>* base) const {
    const int dim = p_.embedding_dim;
    const double scale = noise / std::sqrt(static_cast<double>(dim));
    std::vector<double> v(static_cast<size_t>(dim));
    for (int i = 0; i < dim; ++i) v[i] = (base ? (*base)[i] : 0.0) + scale * rng.normal();
    normalise(v);
    return v;
  }

  // The intent's centroid and class, from (seed, intent) alone.
  Intent& intent_of(int64_t id) {
    auto [it, fresh] = intents_.try_emplace(id);
    if (!fresh) return it->second;
    Intent& intent = it->second;
    Rng rng(mix_seed(intent_seed_, static_cast<uint64_t>(id)));
    double total = 0;
    for (double w : class_weights_) total += w;
    const double u = rng.uniform() * total;
    double cumulative = 0;
    for (size_t k = 0; k < class_weights_.size(); ++k) {
      if (class_weights_[k] <= 0) continue;
      intent.request_class = static_cast<int>(k);  // the last positive class when rounding leaves u past the end
      cumulative += class_weights_[k];
      if (u < cumulative) break;
    }
    if (topics_.empty()) {
      intent.centroid = random_unit(rng, 1.0, nullptr);
    } else {
      const auto& topic = topics_[rng.below(topics_.size())];
      intent.centroid = random_unit(rng, p_.topic_spread, &topic);
    }
    return intent;
  }

  SemanticParams p_;
  ZipfSampler popularity_;
  std::vector<double> class_weights_;
  uint64_t intent_seed_;
  std::vector<std::vector<double>> topics_;  // unit centroids
  std::unordered_map<int64_t, Intent> intents_;  // those asked so far
};

TESTBED_REGISTER(WorkloadRegistry, "semantic",
                 [](const SemanticParams& p, const WorkloadConfig& c, const WorkloadContext& ctx) {
                   return std::make_unique<SemanticWorkload>(p, c, ctx);
                 });

}  // namespace
}  // namespace testbed
