#include "sim/model_router.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/common/rng.h"

namespace testbed {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + std::string(1, sep)) {
    if (c == sep) {
      const size_t a = cur.find_first_not_of(" \t"), b = cur.find_last_not_of(" \t");
      out.push_back(a == std::string::npos ? "" : cur.substr(a, b - a + 1));
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> ModelRoutingConfig::pools() const {
  std::vector<std::string> out;
  if (class_pools.empty()) return out;
  for (const std::string& p : split(class_pools, ',')) {
    require(!p.empty(), "ingress.class_pools", "an empty pool name in '" + class_pools + "'");
    out.push_back(p);
  }
  return out;
}

std::vector<std::vector<double>> ModelRoutingConfig::matrix() const {
  const size_t k = pools().size();
  std::vector<std::vector<double>> m;
  if (confusion.empty()) {
    for (size_t c = 0; c < k; ++c) {
      m.emplace_back(k, k > 1 ? (1.0 - classifier_accuracy) / static_cast<double>(k - 1) : 0.0);
      m.back()[c] = k > 1 ? classifier_accuracy : 1.0;
    }
    return m;
  }
  for (const std::string& row : split(confusion, ';')) {
    std::istringstream in(row);
    std::vector<double> r;
    std::string cell;
    while (in >> cell) {
      char* end = nullptr;
      const double v = std::strtod(cell.c_str(), &end);
      require(end == cell.c_str() + cell.size() && std::isfinite(v) && v >= 0, "ingress.confusion",
              "'" + cell + "' is not a probability");
      r.push_back(v);
    }
    m.push_back(r);
  }
  require(m.size() == k, "ingress.confusion",
          "has " + std::to_string(m.size()) + " rows; ingress.class_pools names " + std::to_string(k) + " classes");
  for (size_t c = 0; c < k; ++c) {
    require(m[c].size() == k, "ingress.confusion", "row " + std::to_string(c) + " has " + std::to_string(m[c].size()) +
                                                         " entries, not " + std::to_string(k));
    double sum = 0;
    for (double v : m[c]) sum += v;
    require(std::abs(sum - 1.0) < 1e-6, "ingress.confusion", "row " + std::to_string(c) + " sums to " +
                                                                   std::to_string(sum) + ", not 1");
  }
  return m;
}

void ModelRoutingConfig::bind(OptionTable& t) {
  t.add("ingress.model_router", &model_router, "none | class: send each request to the pool of its predicted class");
  t.add("ingress.class_pools", &class_pools, "pools serving classes 0, 1, ... (comma-separated names)");
  t.add("ingress.classifier_accuracy", &classifier_accuracy, "share of requests classified right (others: uniform)");
  t.add("ingress.confusion", &confusion, "confusion matrix, rows = true class: 'p p; p p' (overrides the accuracy)");
  t.add("ingress.quality_failure", &quality_failure, "probability that a request served below its class fails");
  t.add("ingress.seed", &seed, "seed of the classifier's and the quality draws");
}

void ModelRoutingConfig::validate(const std::vector<std::string>& pool_names, const std::vector<bool>& unified) const {
  require(model_router == "none" || model_router == "class", "ingress.model_router",
          "must be none or class, got '" + model_router + "'");
  require(classifier_accuracy >= 0 && classifier_accuracy <= 1, "ingress.classifier_accuracy", "must be in [0, 1]");
  require(quality_failure >= 0 && quality_failure <= 1, "ingress.quality_failure", "must be in [0, 1]");
  if (!enabled()) {
    require(class_pools.empty(), "ingress.class_pools", "is used only with ingress.model_router = class");
    return;
  }
  const std::vector<std::string> p = pools();
  require(p.size() >= 2, "ingress.class_pools", "model routing needs at least two pools, one per class");
  for (size_t c = 0; c < p.size(); ++c) {
    const auto it = std::find(pool_names.begin(), pool_names.end(), p[c]);
    require(it != pool_names.end(), "ingress.class_pools", "no pool named '" + p[c] + "' ([pool." + p[c] + "])");
    require(unified[it - pool_names.begin()], "ingress.class_pools",
            "pool " + p[c] + " must be a unified pool (a model router sends whole requests)");
    for (size_t d = 0; d < c; ++d) require(p[d] != p[c], "ingress.class_pools", "pool " + p[c] + " is named twice");
  }
  require(p.size() == pool_names.size(), "ingress.class_pools",
          "must name every pool of the cluster (" + std::to_string(pool_names.size()) + "), each serving a class");
  matrix();
}

ClassRouter::ClassRouter(const ModelRoutingConfig& c)
    : matrix_(c.matrix()), failure_(c.quality_failure), seed_(c.seed) {}

double ClassRouter::draw(int64_t id, uint64_t stream) const {
  uint64_t s = mix_seed(mix_seed(seed_, stream), static_cast<uint64_t>(id));
  return static_cast<double>(splitmix64(s) >> 11) * 0x1.0p-53;
}

int ClassRouter::predict(int64_t id, int c) const {
  const std::vector<double>& row = matrix_.at(static_cast<size_t>(c));
  const double u = draw(id, 1);
  double acc = 0;
  for (size_t k = 0; k < row.size(); ++k) {
    acc += row[k];
    if (u < acc) return static_cast<int>(k);
  }
  // Rounding: the last class with any mass.
  for (size_t k = row.size(); k-- > 0;)
    if (row[k] > 0) return static_cast<int>(k);
  return c;
}

bool ClassRouter::quality_failure(int64_t id, int c, int routed) const {
  return routed < c && draw(id, 2) < failure_;
}

}  // namespace testbed
