// Hand-off between two CPU engines in one process (prefill on A, decode on B):
// A hands each sequence off after its first token, its KV blocks are copied
// into B's cache (only the blocks B does not already hold), and B decodes.
// The generated tokens must be exactly those of one engine doing both; no
// block may leak on either side; B's back-pressure delays but loses nothing.
#include <catch2/catch.hpp>
#include <map>

#include "engine/cpu_executor.h"
#include "engine/engine.h"
#include "engine/kv_transfer.h"
#include "engine/metrics/run_recorder.h"
#include "support/engine_harness.h"

using namespace testbed;
using namespace testbed::test;

namespace {

EngineConfig engine_config(bool prefix_cache) {
  EngineConfig cfg;
  cfg.cache.block_size = 8;
  cfg.cache.prefix_cache = prefix_cache;
  cfg.scheduler.max_num_seqs = 4;
  cfg.scheduler.max_batch_tokens = 64;
  cfg.scheduler.chunk_size = 24;
  cfg.max_model_len = 512;
  return cfg;
}

std::unique_ptr<Engine> cpu_engine(int instance, const EngineConfig& cfg, int num_blocks, const ModelConfig& model,
                                   MetricsSink* sink) {
  return std::make_unique<Engine>(
      instance, cfg, num_blocks,
      std::make_unique<CpuExecutor>(model, make_dummy_weights(model, 5), num_blocks, cfg.cache.block_size,
                                    cfg.max_model_len),
      sink);
}

struct Split {
  std::map<int64_t, std::vector<int32_t>> tokens;
  int transfers = 0, copied_blocks = 0, reused_blocks = 0, waits = 0;
  size_t bytes = 0;
  std::vector<RequestRecord> records;
};

// A prefills and hands off; B receives and decodes. Both on one virtual clock
// (10 ms steps, taken in turn); a hand-off B cannot take yet waits for room.
Split run_split(const std::vector<Request>& reqs, const ModelConfig& model, bool prefix_cache, int decode_blocks) {
  RunRecorder rec(false, /*keep_tokens=*/true);
  EngineConfig prefill_cfg = engine_config(prefix_cache);
  prefill_cfg.hand_off_after_prefill = true;
  auto a = cpu_engine(0, prefill_cfg, 200, model, &rec);
  auto b = cpu_engine(1, engine_config(prefix_cache), decode_blocks, model, &rec);
  Split out;
  std::vector<HandOff> pending;
  double now = 0.0;
  size_t next = 0;
  while (next < reqs.size() || a->has_unfinished() || b->has_unfinished() || !pending.empty()) {
    while (next < reqs.size() && reqs[next].arrival_s <= now) a->add_request(reqs[next++], now);
    if (a->has_unfinished()) {
      StepOutcome o = a->step(now);
      for (const SeqOutcome& s : o.seqs)
        if (s.handed_off) REQUIRE(s.first_token);
      for (HandOff& h : o.handed_off) pending.push_back(std::move(h));
    }
    for (auto it = pending.begin(); it != pending.end();) {
      KvTransferStats stats;
      if (transfer_kv(*a, *b, *it, now, &stats)) {
        ++out.transfers;
        out.copied_blocks += stats.num_blocks;
        out.reused_blocks += stats.num_reused_blocks;
        out.bytes += stats.num_bytes;
        it = pending.erase(it);
      } else {
        ++out.waits;  // back-pressure: the sequence waits, its blocks still held by A
        ++it;
      }
    }
    if (b->has_unfinished()) b->step(now);
    REQUIRE(a->check_invariants().empty());
    REQUIRE(b->check_invariants().empty());
    now += 0.01;
  }
  CHECK(a->kv_cache().num_used_blocks() == 0);
  CHECK(a->kv_cache().num_exports() == 0);
  CHECK(b->kv_cache().num_used_blocks() == 0);
  out.tokens = outputs_by_id(rec);
  out.records = rec.requests();
  return out;
}

std::map<int64_t, std::vector<int32_t>> run_single(const std::vector<Request>& reqs, const ModelConfig& model) {
  RunRecorder rec(false, true);
  auto e = cpu_engine(0, engine_config(true), 200, model, &rec);
  run_virtual(*e, reqs);
  return outputs_by_id(rec);
}

}  // namespace

TEST_CASE("a sequence prefilled on one engine decodes on another with identical tokens", "[engine][handoff]") {
  const ModelConfig model = micro_model();
  const std::vector<Request> reqs = shared_prefix_requests(6, 40, 9, 12, model.vocab_size, 11, 0.03);
  const auto single = run_single(reqs, model);
  REQUIRE(single.size() == reqs.size());
  for (bool prefix_cache : {false, true}) {
    INFO("prefix cache " << prefix_cache);
    const Split split = run_split(reqs, model, prefix_cache, 200);
    CHECK(split.tokens == single);
    CHECK(split.transfers == static_cast<int>(reqs.size()));
    CHECK(split.waits == 0);
    // Every request finished on the decode engine, after its first token on the prefill engine.
    for (const RequestRecord& r : split.records) {
      CHECK(r.instance == 1);
      CHECK(r.first_token_s <= r.finish_s);
      CHECK(r.output_tokens == 12);
    }
    // The copied bytes are the blocks' K and V, every layer, in floats.
    const size_t block_bytes = 2ull * model.num_layers * model.num_kv_heads * 8 * model.head_dim * sizeof(float);
    CHECK(split.bytes == split.copied_blocks * block_bytes);
    if (prefix_cache)
      CHECK(split.reused_blocks > 0);  // the shared prompt was on B already: only the rest moved
    else
      CHECK(split.reused_blocks == 0);
  }
}

TEST_CASE("a decode engine without room delays hand-offs and loses none", "[engine][handoff]") {
  const ModelConfig model = micro_model();
  const std::vector<Request> reqs = shared_prefix_requests(6, 40, 9, 12, model.vocab_size, 3, 0.0);
  const auto single = run_single(reqs, model);
  // 20 blocks of 8 hold two of these sequences (about 8 blocks each) at a time.
  const Split split = run_split(reqs, model, false, 20);
  CHECK(split.waits > 0);
  CHECK(split.transfers == static_cast<int>(reqs.size()));
  CHECK(split.tokens == single);
}
