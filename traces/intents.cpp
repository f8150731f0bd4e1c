// IntentParams (the intent keys), IntentModel (popularity, centroids, wordings,
// classes) and IntentOverlay (workload.intents = overlay). See intents.h.
#include "traces/intents.h"

#include <algorithm>
#include <cmath>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"

namespace testbed {

void IntentParams::bind(OptionTable& t) {
  t.add("workload.intents", &mode,
        "none | overlay: give any kind's requests intents, embeddings and classes (semantic has its own)");
  t.add("workload.num_intents", &num_intents, "semantic, intents = overlay: distinct questions");
  t.add("workload.intent_zipf", &intent_zipf,
        "semantic, intents = overlay: Zipf exponent of question popularity (0 = uniform)");
  t.add("workload.exact_repeat", &exact_repeat,
        "semantic, intents = overlay: probability that a request repeats an earlier wording of its question exactly");
  t.add("workload.embedding_dim", &embedding_dim, "semantic, intents = overlay: prompt embedding dimension");
  t.add("workload.paraphrase_noise", &paraphrase_noise,
        "semantic, intents = overlay: RMS norm of the noise a new wording adds to its question's unit centroid");
  t.add("workload.intent_clusters", &intent_clusters,
        "semantic, intents = overlay: topics grouping the questions' centroids (0 = independent centroids)");
  t.add("workload.topic_spread", &topic_spread,
        "semantic, intents = overlay: RMS norm of a question's offset from its topic");
  t.add("workload.class_weights", &class_weights,
        "semantic, intents = overlay: comma-separated weights of difficulty classes 0, 1, ... (each question draws "
        "one)");
}

void IntentParams::validate() const {
  require(mode == "none" || mode == "overlay", "workload.intents",
          "unknown value '" + mode + "' (known: none, overlay)");
  require(num_intents > 0, "workload.num_intents", "must be positive");
  require(std::isfinite(intent_zipf) && intent_zipf >= 0, "workload.intent_zipf", "must be >= 0 (0 = uniform)");
  require(exact_repeat >= 0 && exact_repeat <= 1, "workload.exact_repeat", "must be in [0, 1]");
  require(embedding_dim > 0, "workload.embedding_dim", "must be positive");
  require(std::isfinite(paraphrase_noise) && paraphrase_noise >= 0, "workload.paraphrase_noise", "must be >= 0");
  require(intent_clusters >= 0, "workload.intent_clusters", "must be >= 0 (0 = no topics)");
  require(std::isfinite(topic_spread) && topic_spread >= 0, "workload.topic_spread", "must be >= 0");
  parse_class_weights(class_weights);
}

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

namespace {

// v / |v| (v nonzero with overwhelming probability: a Gaussian draw).
void normalise(std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  const double norm = std::sqrt(sum);
  if (norm > 0)
    for (double& x : v) x /= norm;
}

}  // namespace

IntentModel::IntentModel(const IntentParams& p, uint64_t seed)
    : p_(p),
      popularity_(p.num_intents, p.intent_zipf),
      class_weights_(parse_class_weights(p.class_weights)),
      intent_seed_(mix_seed(seed, 4)) {
  Rng topic_rng(mix_seed(seed, 3));
  topics_.resize(static_cast<size_t>(p.intent_clusters));
  for (auto& t : topics_) t = random_unit(topic_rng, 1.0, nullptr);
}

IntentModel::Ask IntentModel::ask(Rng& rng) {
  Ask a;
  a.intent = popularity_.draw(rng);
  const Intent& intent = intent_of(a.intent);  // its own seed: no draw from rng
  a.request_class = intent.request_class;
  const bool repeat = rng.uniform() < p_.exact_repeat;
  if (repeat && !intent.wordings.empty()) a.repeat = &intent.wordings[rng.below(intent.wordings.size())];
  return a;
}

const IntentModel::Wording& IntentModel::add_wording(int64_t id, std::vector<int32_t> tokens, Rng& rng) {
  Intent& intent = intent_of(id);
  Wording w;
  w.tokens = std::move(tokens);
  const auto e = random_unit(rng, p_.paraphrase_noise, &intent.centroid);
  w.embedding.assign(e.begin(), e.end());
  if (intent.wordings.size() < kMaxWordings) {
    intent.wordings.push_back(std::move(w));
    return intent.wordings.back();
  }
  Wording& slot = intent.wordings[intent.oldest];
  slot = std::move(w);
  intent.oldest = (intent.oldest + 1) % kMaxWordings;
  return slot;
}

// normalise(base + noise * g / sqrt(dim)) with g standard Gaussian per
// coordinate (base null: zero), so the noise has RMS norm `noise`.
std::vector<double> IntentModel::random_unit(Rng& rng, double noise, const std::vector<double>* base) const {
  const int dim = p_.embedding_dim;
  const double scale = noise / std::sqrt(static_cast<double>(dim));
  std::vector<double> v(static_cast<size_t>(dim));
  for (int i = 0; i < dim; ++i) v[i] = (base ? (*base)[i] : 0.0) + scale * rng.normal();
  normalise(v);
  return v;
}

// The intent's centroid and class, from (seed, intent) alone.
IntentModel::Intent& IntentModel::intent_of(int64_t id) {
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

IntentOverlay::IntentOverlay(std::unique_ptr<RequestSource> inner, const IntentParams& p, uint64_t workload_seed)
    : inner_(std::move(inner)),
      model_(p, mix_seed(workload_seed, kSeedStream)),
      rng_(mix_seed(mix_seed(workload_seed, kSeedStream), 2)) {}

std::optional<Request> IntentOverlay::next() {
  std::optional<Request> r = inner_->next();
  if (!r) return r;
  const IntentModel::Ask a = model_.ask(rng_);
  if (a.repeat) {
    // The whole prompt is copied, so block hashes (Mooncake's hash-id sharing
    // included) see exactly the earlier request's prefix.
    std::vector<int32_t> prompt;
    prompt.reserve(a.repeat->tokens.size() + static_cast<size_t>(std::max(r->max_output_tokens, 0)));
    prompt.assign(a.repeat->tokens.begin(), a.repeat->tokens.end());
    r->prompt = std::move(prompt);
    r->embedding = a.repeat->embedding;
    r->prompt_block_hashes.clear();  // they described the replaced prompt
    r->prompt_hash_block_size = 0;
  } else {
    std::vector<int32_t> tokens(r->prompt.begin(), r->prompt.end());  // without the reserved room
    r->embedding = model_.add_wording(a.intent, std::move(tokens), rng_).embedding;
  }
  r->intent = a.intent;
  r->request_class = a.request_class;
  return r;
}

}  // namespace testbed
