// Intents: the questions behind requests, for the semantic cache
// (engine/semantic_cache.h) and model routing (sim/model_router.h).
//
// There are workload.num_intents questions of Zipf(workload.intent_zipf)
// popularity. A request draws an intent; with probability
// workload.exact_repeat, and if the intent was asked before, it repeats one of
// the intent's remembered wordings exactly (same tokens, same embedding);
// otherwise it is a new wording with a paraphrase embedding: the intent's unit
// centroid plus Gaussian noise of RMS norm workload.paraphrase_noise,
// renormalised (two wordings have cosine about 1 / (1 + noise^2) in any
// dimension). With workload.intent_clusters > 0 the centroids are grouped in
// topics (a topic's centroid plus noise of RMS norm workload.topic_spread,
// renormalised); 0 gives independent random centroids. Each intent draws a
// difficulty class once, from workload.class_weights.
//
// IntentModel holds these draws and is shared by workload.kind = semantic (new
// wordings are fresh random tokens) and IntentOverlay (workload.intents =
// overlay: new wordings are the inner source's own prompts). Intents are built
// on first use from (seed, intent), so no table of centroids is held, and each
// intent keeps at most kMaxWordings wordings (the oldest replaced).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/common/rng.h"
#include "engine/request_source.h"
#include "traces/zipf_sampler.h"

namespace testbed {

class OptionTable;

// The intent keys (workload.*), bound once by WorkloadConfig: the semantic
// kind and the overlay read the same values.
struct IntentParams {
  std::string mode = "none";  // workload.intents: none | overlay (the overlay's intents on any other kind)
  int64_t num_intents = 1000;
  double intent_zipf = 1.0;
  double exact_repeat = 0.3;
  int embedding_dim = 64;
  double paraphrase_noise = 0.1;
  int intent_clusters = 0;
  double topic_spread = 0.5;
  std::string class_weights = "1";  // comma-separated weights of classes 0, 1, ...

  void bind(OptionTable& table);
  void validate() const;
  bool is_overlay() const { return mode == "overlay"; }
};

// "0.5,0.3,0.2" -> {0.5, 0.3, 0.2}; each finite and >= 0, some positive
// (a ConfigError naming workload.class_weights otherwise).
std::vector<double> parse_class_weights(const std::string& text);

class IntentModel {
 public:
  static constexpr size_t kMaxWordings = 8;

  struct Wording {
    std::vector<int32_t> tokens;
    std::vector<float> embedding;  // unit norm, embedding_dim floats
  };
  // One request's intent, and the earlier wording it repeats exactly (null: it
  // is a new wording; the pointer is valid until the next add_wording).
  struct Ask {
    int64_t intent = 0;
    int request_class = 0;
    const Wording* repeat = nullptr;
  };

  // Topic centroids come from mix_seed(seed, 3), each intent's centroid and
  // class from mix_seed(mix_seed(seed, 4), intent).
  IntentModel(const IntentParams& p, uint64_t seed);

  // Draws from `rng`: the intent (popularity), the repeat coin (always), and
  // for a repeat of an intent with wordings, which one.
  Ask ask(Rng& rng);
  // Remembers `tokens` as a new wording of `intent` with a paraphrase
  // embedding drawn from `rng` (embedding_dim normal draws).
  const Wording& add_wording(int64_t intent, std::vector<int32_t> tokens, Rng& rng);

 private:
  struct Intent {
    std::vector<double> centroid;  // unit
    int request_class = 0;
    std::vector<Wording> wordings;
    size_t oldest = 0;  // the wording a new one replaces once there are kMaxWordings
  };

  std::vector<double> random_unit(Rng& rng, double noise, const std::vector<double>* base) const;
  Intent& intent_of(int64_t id);

  IntentParams p_;
  ZipfSampler popularity_;
  std::vector<double> class_weights_;
  uint64_t intent_seed_;
  std::vector<std::vector<double>> topics_;      // unit centroids
  std::unordered_map<int64_t, Intent> intents_;  // those asked so far
};

// workload.intents = overlay: gives every request of `inner` an intent,
// embedding and class. On an exact repeat the request's prompt becomes the
// earlier wording's tokens (the semantic cache sees an exact duplicate) and
// its embedding that wording's; otherwise its own prompt is a new wording.
// Arrival, output length and everything else stay the inner source's. Draws
// come from seed stream kSeedStream of workload.seed (per request
// mix_seed(base, 2); the model's streams 3 and 4 of base), so the inner
// source's draws never change.
class IntentOverlay : public RequestSource {
 public:
  static constexpr uint64_t kSeedStream = 10;

  IntentOverlay(std::unique_ptr<RequestSource> inner, const IntentParams& p, uint64_t workload_seed);
  std::optional<Request> next() override;
  int64_t size_hint() const override { return inner_->size_hint(); }

 private:
  std::unique_ptr<RequestSource> inner_;
  IntentModel model_;
  Rng rng_;
};

}  // namespace testbed
