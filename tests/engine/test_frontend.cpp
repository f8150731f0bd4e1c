// The serving front end (engine/frontend.h): a request reaches the engine
// frontend.request_s after the client sent it, and a step's tokens reach the
// client output_lag_steps of its durations plus output_s after it ends. On
// the real CPU model with a virtual clock: the engine's batches and tokens are
// those without a front end, every delivery is shifted by exactly the model's
// terms, and TTFT and E2E are counted from the client's send.
#include <catch2/catch.hpp>

#include "engine/frontend.h"
#include "engine/metrics/run_recorder.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

struct Run {
  std::vector<RequestRecord> requests;
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::vector<StepRecord> steps;
};

Run run(const FrontendConfig& fe) {
  const ModelConfig model = micro_model();
  EngineConfig cfg;
  cfg.cache.block_size = 8;
  cfg.scheduler.max_num_seqs = 4;
  cfg.scheduler.max_batch_tokens = 64;
  cfg.max_model_len = 256;
  cfg.frontend = fe;
  RunRecorder rec(true, true);
  Engine engine(0, cfg, 200, std::make_unique<CpuExecutor>(model, make_dummy_weights(model, 3), 200, 8, 256), &rec);
  // What the driver sees: the source's requests after the front end.
  FrontendSource source(std::make_unique<ListSource>(shared_prefix_requests(6, 16, 4, 12, model.vocab_size, 5, 0.013)),
                        fe.request_s);
  std::vector<Request> seen;
  while (auto r = source.next()) seen.push_back(std::move(*r));
  run_virtual(engine, seen, 0.01);
  Run out;
  out.requests = rec.requests();
  out.tokens = outputs_by_id(rec);
  out.steps = rec.steps();
  return out;
}

}  // namespace

TEST_CASE("the front end delays admission and delivery by exactly its terms", "[frontend]") {
  const Run plain = run(FrontendConfig{});
  FrontendConfig fe;
  fe.request_s = 0.004;
  fe.output_lag_steps = 1.0;
  fe.output_s = 0.0015;
  REQUIRE_NOTHROW(fe.validate());
  const Run front = run(fe);
  REQUIRE(front.requests.size() == plain.requests.size());
  CHECK(front.tokens == plain.tokens);  // the engine's work is unchanged
  for (size_t i = 0; i < plain.requests.size(); ++i) {
    const RequestRecord &a = plain.requests[i], &b = front.requests[i];
    INFO("request " << a.id);
    REQUIRE(a.id == b.id);
    CHECK(b.arrival_s == Approx(a.arrival_s).margin(1e-12));  // the client's send, as before
    // The engine saw it 4 ms later, on a clock where every step lasts 10 ms;
    // its tokens show one step (10 ms) and 1.5 ms after their step.
    const double shift = b.first_token_s - a.first_token_s;
    CHECK(shift >= 0.0115 - 1e-9);
    CHECK(shift <= 0.0115 + 0.01 + 1e-9);  // plus at most the wait for the step boundary it now misses
    CHECK(b.ttft_s() == Approx(b.first_token_s - a.arrival_s));
    CHECK(b.e2e_s() - b.ttft_s() == Approx(a.e2e_s() - a.ttft_s()).margin(0.01 + 1e-9));
  }
  // The first request finds the engine idle: everything moves by 4 ms, and its
  // first token shows 11.5 ms after its step.
  for (size_t i = 0; i < plain.requests.size(); ++i)
    if (plain.requests[i].id == 0)
      CHECK(front.requests[i].first_token_s - plain.requests[i].first_token_s == Approx(0.0155).margin(1e-12));
  // Every step's tokens, seen from the recorder: step end + 10 ms + 1.5 ms.
  const RequestRecord& first = front.requests.front();
  bool found = false;
  for (const StepRecord& s : front.steps)
    if (std::abs(s.start_s + s.duration_s + 0.0115 - first.first_token_s) < 1e-9) found = true;
  CHECK(found);
}

TEST_CASE("frontend keys reject negative or absurd values", "[frontend]") {
  FrontendConfig a;
  a.request_s = -1;
  CHECK_THROWS_WITH(a.validate(), Catch::Contains("frontend.request_s"));
  FrontendConfig b;
  b.output_lag_steps = 100;
  CHECK_THROWS_WITH(b.validate(), Catch::Contains("frontend.output_lag_steps"));
  FrontendConfig c;
  c.output_s = -0.1;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("frontend.output_s"));
}
