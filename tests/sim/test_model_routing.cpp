// Model routing (sim/model_router.h): each class goes where the confusion
// matrix says (chi-square at 0.001 per class, with power against a wrong
// matrix); quality failures happen only below a request's class, at the
// configured rate; in a fleet of three pools of different speed every request
// is served by the pool of its predicted class; bad keys name the key.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/common/config_error.h"
#include "engine/common/option_table.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"
#include "sim/cost_model.h"
#include "sim/fleet.h"
#include "sim/model_router.h"
#include "sim/sim_executor.h"
#include "support/chi_square.h"
#include "support/engine_harness.h"

using namespace testbed;

namespace {

ModelRoutingConfig routing(const std::vector<std::pair<std::string, std::string>>& keys) {
  ModelRoutingConfig c;
  set_options(c, keys);
  return c;
}

const std::vector<std::string> kPools = {"small", "medium", "large"};
const std::vector<bool> kUnified = {true, true, true};

class ClassedSource : public RequestSource {
 public:
  explicit ClassedSource(int n) : n_(n) {}
  std::optional<Request> next() override {
    if (id_ >= n_) return std::nullopt;
    Request r;
    r.id = id_;
    r.arrival_s = id_ * 0.02;
    r.prompt = test::random_tokens(rng_, 64, 1000);
    r.max_output_tokens = 8;
    r.request_class = static_cast<int>(rng_.below(3));
    ++id_;
    return r;
  }

 private:
  int n_;
  int64_t id_ = 0;
  Rng rng_{5};
};

}  // namespace

TEST_CASE("the classifier sends each class where the confusion matrix says", "[model_routing]") {
  const ModelRoutingConfig c = routing({{"ingress.model_router", "class"},
                                        {"ingress.class_pools", "small, medium, large"},
                                        {"ingress.confusion", "0.7 0.2 0.1; 0.15 0.8 0.05; 0 0.25 0.75"}});
  c.validate(kPools, kUnified);
  const ClassRouter router(c);
  const auto m = c.matrix();
  const ModelRoutingConfig wrong_c = routing({{"ingress.model_router", "class"},
                                              {"ingress.class_pools", "small, medium, large"},
                                              {"ingress.classifier_accuracy", "0.75"}});
  const auto wrong = wrong_c.matrix();
  const int n = 20000;
  for (int cls = 0; cls < 3; ++cls) {
    INFO("class " << cls);
    std::vector<int> counts(3, 0);
    for (int id = 0; id < n; ++id) ++counts[router.predict(id, cls)];
    const std::vector<float> p(m[cls].begin(), m[cls].end()), q(wrong[cls].begin(), wrong[cls].end());
    int dof = 0;
    const double stat = test::chi_square(counts, p.data(), n, &dof);
    CHECK(stat < test::chi_square_critical_999(dof));
    if (cls == 2) CHECK(counts[0] == 0);  // a zero in the matrix is never drawn
    int dof_wrong = 0;
    CHECK(test::chi_square(counts, q.data(), n, &dof_wrong) > test::chi_square_critical_999(dof_wrong));  // power
  }
}

TEST_CASE("quality failures happen only below a request's class, at the configured rate", "[model_routing]") {
  const ClassRouter r(routing({{"ingress.model_router", "class"},
                               {"ingress.class_pools", "small, medium, large"},
                               {"ingress.quality_failure", "0.3"}}));
  int fails = 0;
  for (int id = 0; id < 10000; ++id) {
    CHECK_FALSE(r.quality_failure(id, 1, 1));
    CHECK_FALSE(r.quality_failure(id, 1, 2));
    fails += r.quality_failure(id, 2, 0);
  }
  CHECK(std::abs(fails - 3000) < 4.5 * std::sqrt(10000 * 0.3 * 0.7));
}

TEST_CASE("every request is served by the pool of its predicted class", "[model_routing]") {
  const ModelConfig model = test::micro_model(1000);
  RunRecorder rec;
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<FleetPool> pools(3);
  EngineConfig cfg;
  cfg.max_model_len = 1024;
  const double speed[] = {1e-5, 4e-5, 1.6e-4};  // small pools step fastest
  for (int p = 0; p < 3; ++p) {
    CostModelConfig cm;
    set_options(cm, {{"cost_model.prefill_token_s", std::to_string(speed[p])}, {"cost_model.decode_seq_s", "1e-4"}});
    pools[p].name = kPools[p];
    for (int k = 0; k < 2; ++k) {
      const int id = static_cast<int>(engines.size());
      engines.push_back(std::make_unique<Engine>(id, cfg, 200, std::make_unique<SimExecutor>(make_cost_model(cm, model), 1000), &rec));
      pools[p].engines.push_back(engines.back().get());
    }
    RouterSetup rs;
    rs.num_instances = 2;
    rs.blocks_per_instance = 200;
    pools[p].router = make_router(router_choice("least_loaded"), rs);
  }
  FleetOptions opt;
  opt.sink = &rec;
  opt.model_routing = routing({{"ingress.model_router", "class"},
                               {"ingress.class_pools", "small,medium,large"},
                               {"ingress.classifier_accuracy", "0.8"},
                               {"ingress.quality_failure", "1"}});
  Fleet fleet(std::move(pools), opt);
  ClassedSource source(600);
  fleet.run(source, nullptr);
  REQUIRE(rec.num_finished() == 600);
  int right = 0;
  for (const RequestRecord& r : rec.requests()) {
    CHECK(r.instance / 2 == r.routed_class);  // pool k holds instances 2k and 2k + 1
    CHECK(r.quality_failure == (r.routed_class < r.request_class));  // quality_failure = 1
    right += r.routed_class == r.request_class;
  }
  CHECK(std::abs(right - 480) < 4.5 * std::sqrt(600 * 0.8 * 0.2));
  const Summary s = summarize(rec, 6, SloConfig{});
  CHECK(s.get("quality_failure_rate") == Approx(s.get("routed_below_class_share")));
}

TEST_CASE("bad model-routing keys are errors naming the key", "[model_routing]") {
  const auto bad = [](const std::vector<std::pair<std::string, std::string>>& keys) {
    routing(keys).validate(kPools, kUnified);
  };
  CHECK_THROWS_WITH(bad({{"ingress.model_router", "llm"}}), Catch::Contains("ingress.model_router"));
  CHECK_THROWS_WITH(bad({{"ingress.model_router", "class"}, {"ingress.class_pools", "small"}}),
                    Catch::Contains("at least two"));
  CHECK_THROWS_WITH(bad({{"ingress.model_router", "class"}, {"ingress.class_pools", "small,huge,large"}}),
                    Catch::Contains("no pool named 'huge'"));
  CHECK_THROWS_WITH(bad({{"ingress.model_router", "class"}, {"ingress.class_pools", "small,large"}}),
                    Catch::Contains("every pool"));
  CHECK_THROWS_WITH(bad({{"ingress.model_router", "class"}, {"ingress.class_pools", "small,medium,large"},
                         {"ingress.confusion", "1 0 0; 0 1 0"}}),
                    Catch::Contains("2 rows"));
  CHECK_THROWS_WITH(bad({{"ingress.model_router", "class"}, {"ingress.class_pools", "small,medium,large"},
                         {"ingress.confusion", "1 0 0; 0 0.5 0; 0 0 1"}}),
                    Catch::Contains("sums to"));
  CHECK_THROWS_WITH(bad({{"ingress.class_pools", "small,medium,large"}}), Catch::Contains("only with"));
  CHECK_THROWS_WITH(routing({{"ingress.model_router", "class"}, {"ingress.class_pools", "a,b"}})
                        .validate({"a", "b"}, {true, false}),
                    Catch::Contains("unified"));
}
