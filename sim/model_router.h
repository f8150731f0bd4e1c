// Model routing at the ingress (seeds 001 and 002): requests carry a
// difficulty class (Request::request_class, from the workload: workload.kind =
// semantic draws one per intent with workload.class_weights); a classifier
// with a given accuracy, or a confusion matrix, predicts it, and the request
// goes to the pool serving the predicted class, each pool its own model and
// hardware (pool.NAME.model.config, pool.NAME.cost_model.hardware). A request
// sent to a pool of a lower class than its own is a quality failure with
// probability ingress.quality_failure (a small model answering a hard question).
//
//   ingress.model_router = class
//   ingress.class_pools = small, medium, large   # pool for class 0, 1, 2
//   ingress.classifier_accuracy = 0.9            # right with p, else another class uniformly
//   ingress.confusion = 0.9 0.1 0; 0.1 0.8 0.1; 0 0.2 0.8   # or rows (true) x columns (predicted)
//   ingress.quality_failure = 0.5
//
// Draws are counter-based on (ingress.seed, request id): a request's route
// does not depend on what came before it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace testbed {

class OptionTable;

struct ModelRoutingConfig {
  std::string model_router = "none";  // none | class
  std::string class_pools;            // pool names, class 0 first
  double classifier_accuracy = 1.0;
  std::string confusion;              // rows "p p p; p p p; ..." (empty: from classifier_accuracy)
  double quality_failure = 1.0;
  uint64_t seed = 1;

  bool enabled() const { return model_router == "class"; }
  std::vector<std::string> pools() const;
  // Rows of the confusion matrix (true class) over predicted classes, each summing to 1.
  std::vector<std::vector<double>> matrix() const;
  void bind(OptionTable& table);
  // `pool_names`: the cluster's pools; `unified`: whether each is a unified pool.
  void validate(const std::vector<std::string>& pool_names, const std::vector<bool>& unified) const;
};

class ClassRouter {
 public:
  explicit ClassRouter(const ModelRoutingConfig& config);
  int num_classes() const { return static_cast<int>(matrix_.size()); }
  // The class the classifier predicts for request `id` of true class `c`.
  int predict(int64_t id, int c) const;
  // Whether request `id` of class `c`, served by the pool of class `routed`, fails in quality.
  bool quality_failure(int64_t id, int c, int routed) const;

 private:
  double draw(int64_t id, uint64_t stream) const;
  std::vector<std::vector<double>> matrix_;
  double failure_;
  uint64_t seed_;
};

}  // namespace testbed
