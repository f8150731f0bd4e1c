// Same objects, proven: a workload runs through the real CPU engine on the wall
// clock while every step's batch is recorded; the simulator then runs the same
// workload with an executor that replays the real step durations. The two runs
// must schedule identical batches, step for step: same sequences, same token
// counts, same preemptions.
#include <catch2/catch.hpp>

#include "engine/common/option_table.h"
#include "engine/cpu_executor.h"
#include "engine/driver.h"
#include "engine/metrics/run_recorder.h"
#include "sim/replay_executor.h"
#include "sim/simulated_driver.h"
#include "support/engine_harness.h"
#include "traces/workload.h"

using namespace testbed;

namespace {

struct ScheduledRecord {
  std::vector<std::array<int64_t, 3>> items;  // id, num_computed, num_new
  std::vector<int64_t> preempted;
  bool operator==(const ScheduledRecord& o) const { return items == o.items && preempted == o.preempted; }
};

// Records every batch it is given, then lets the wrapped executor run it.
class RecordingExecutor : public Executor {
 public:
  RecordingExecutor(std::unique_ptr<Executor> inner, std::vector<ScheduledRecord>& log)
      : inner_(std::move(inner)), log_(log) {}
  StepResult execute(const Batch& batch) override {
    ScheduledRecord rec;
    for (const ScheduledSeq& s : batch.items) rec.items.push_back({s.seq->id(), s.num_computed, s.num_new});
    rec.preempted = batch.preempted;
    log_.push_back(rec);
    return inner_->execute(batch);
  }
  std::string name() const override { return "recording " + inner_->name(); }

 private:
  std::unique_ptr<Executor> inner_;
  std::vector<ScheduledRecord>& log_;
};

}  // namespace

TEST_CASE("the simulator replays a real CPU run with identical batches step for step", "[sim][identity]") {
  const ModelConfig model = test::micro_model();
  EngineConfig cfg;
  cfg.cache.block_size = 8;
  cfg.scheduler.max_num_seqs = 6;
  cfg.scheduler.max_batch_tokens = 48;
  cfg.scheduler.chunk_size = 24;
  cfg.max_model_len = 512;
  const int num_blocks = 22;  // tight: preemptions happen
  WorkloadConfig w;
  w.num_requests = 24;
  w.rate = 400.0;  // bursts that queue behind each other
  set_options(w, {{"workload.system_prompt_tokens", "16"}, {"workload.user_tokens", "40"}}); 
  w.output_tokens = 14;
  w.seed = 4;
  WorkloadContext ctx;
  ctx.vocab_size = model.vocab_size;

  // Real run on the wall clock.
  std::vector<ScheduledRecord> real_log;
  RunRecorder real_rec;
  {
    auto cpu = std::make_unique<CpuExecutor>(model, make_dummy_weights(model, 1), num_blocks, cfg.cache.block_size,
                                             cfg.max_model_len);
    Engine engine(0, cfg, num_blocks, std::make_unique<RecordingExecutor>(std::move(cpu), real_log), &real_rec);
    auto source = make_workload(w, ctx);
    run_realtime(engine, *source, nullptr);
  }
  REQUIRE(real_rec.num_finished() == w.num_requests);
  const auto& steps = real_rec.steps();
  REQUIRE(steps.size() == real_log.size());

  // Step k lasts until step k+1 starts when the engine stayed busy, else until it ended.
  std::vector<double> durations;
  for (size_t k = 0; k < steps.size(); ++k) {
    const bool busy_after = steps[k].num_running + steps[k].num_waiting > 0;
    durations.push_back(busy_after && k + 1 < steps.size() ? steps[k + 1].start_s - steps[k].start_s
                                                           : steps[k].duration_s);
  }

  std::vector<ScheduledRecord> sim_log;
  RunRecorder sim_rec;
  {
    auto replay = std::make_unique<ReplayExecutor>(durations, model.vocab_size);
    Engine engine(0, cfg, num_blocks, std::make_unique<RecordingExecutor>(std::move(replay), sim_log), &sim_rec);
    auto source = make_workload(w, ctx);
    run_simulated(engine, *source, nullptr);
  }
  REQUIRE(sim_rec.num_finished() == w.num_requests);
  REQUIRE(sim_log.size() == real_log.size());
  int64_t preemptions = 0;
  for (size_t k = 0; k < real_log.size(); ++k) {
    INFO("step " << k);
    REQUIRE(sim_log[k] == real_log[k]);
    preemptions += static_cast<int64_t>(real_log[k].preempted.size());
  }
  CHECK(preemptions > 0);  // the comparison covered preemption too
  // And the simulated clock agrees with the wall clock at every step start.
  for (size_t k = 0; k < steps.size(); ++k) CHECK(sim_rec.steps()[k].start_s == Approx(steps[k].start_s).margin(1e-9));
}
