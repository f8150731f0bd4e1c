// The serving front end as a client sees it (frontend.*): what happens to a
// request outside the engine's steps, in every mode (the simulator, the CPU
// and CUDA engines), so TTFT and E2E mean what a benchmark client measures.
//
//   request_s          before the engine sees a request: HTTP handling,
//                      tokenization, the hop to the engine process (vLLM's API
//                      server -> engine core). The request reaches the engine
//                      request_s after the client sent it.
//   output_lag_steps   when a token becomes visible relative to the step that
//                      produced it: after that step ends plus this many of its
//                      durations. An engine that turns a step's output into
//                      text and streams it while the next step runs (vLLM's
//                      output processing in the API server process) shows
//                      tokens about one step late; 0 is a token visible the
//                      instant its step ends.
//   output_s           then a fixed cost: detokenization, the SSE write, the
//                      network to the client.
//
// The defaults are 0 (the engine alone, as before); the hardware specs'
// calibrated values and how they were fitted are in experiments/hardware/ and
// the README ("Fidelity against real serving").
#pragma once

#include <memory>
#include <optional>

#include "engine/request_source.h"

namespace testbed {

class OptionTable;

struct FrontendConfig {
  double request_s = 0.0;
  double output_lag_steps = 0.0;
  double output_s = 0.0;

  // When the client sees the tokens of a step that ran [start_s, end_s].
  double visible_s(double start_s, double end_s) const {
    return end_s + output_lag_steps * (end_s - start_s) + output_s;
  }
  bool any() const { return request_s != 0.0 || output_lag_steps != 0.0 || output_s != 0.0; }
  void bind(OptionTable& table);
  void validate() const;
};

// `inner`'s requests as the engine sees them: request_s after each was sent
// (arrival_s shifted by it, Request::frontend_s recording it).
class FrontendSource : public RequestSource {
 public:
  FrontendSource(std::unique_ptr<RequestSource> inner, double request_s)
      : inner_(std::move(inner)), request_s_(request_s) {}
  std::optional<Request> next() override {
    std::optional<Request> r = inner_->next();
    if (r) {
      r->arrival_s += request_s_;
      r->frontend_s += request_s_;
    }
    return r;
  }
  int64_t size_hint() const override { return inner_->size_hint(); }

 private:
  std::unique_ptr<RequestSource> inner_;
  double request_s_;
};

}  // namespace testbed
