// Fleet-level metrics from a run's records: per-instance and per-pool tables,
// load imbalance, what the prefix cache saved, cost and energy, and the
// hand-offs of a disaggregated run.
#pragma once

#include <string>
#include <vector>

#include "engine/metrics/results_file.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"

namespace testbed {

// One pool of identical instances (a run without pools is one pool, "main").
struct PoolFacts {
  std::string name = "main", role = "unified", hardware;
  int first_instance = 0, size = 1;
  int gpus_per_instance = 1;        // tensor parallelism
  int kv_blocks_per_instance = 0;
  double price_per_gpu_hour = 0.0;  // USD (0: unknown)
  double power_w_per_gpu = 0.0;     // TDP (0: unknown)
};

struct FleetCostFacts {
  int num_instances = 1;
  int gpus_per_instance = 1;
  std::vector<PoolFacts> pools;         // empty: one pool of num_instances x gpus_per_instance
  double flops_per_prompt_token = 0.0;  // dense FLOPs of one prefill token (2 x parameters)
  double prefill_s_per_token = 0.0;     // marginal prefill time per token on one instance (0: unknown)
  double requests_per_day = 1e6;        // the stated rate for the per-day figure
};

// Adds to `summary`: load imbalance (max / mean requests and busy time per
// instance), GPU-seconds, prefill FLOPs avoided by cache hits, and GPU-hours per
// day those hits save at the stated request rate. With prices and powers for
// every pool: cost_usd, usd_per_million_output_tokens, energy_kwh (at TDP),
// output_tokens_per_kwh. With several pools: pool_<name>_utilization (busy
// share), pool_<name>_kv_usage_mean (blocks in use, time-weighted over the
// run), pool_<name>_batch_size_mean (sequences per step) and pool_<name>_gpu_seconds. With hand-offs: handoff_wait_{mean,p99}_s,
// transfer_{mean,p99}_s, transfer_gb (total) and transfer_reused_share (blocks
// the decode side already held).
void add_fleet_metrics(const RunRecorder& rec, const FleetCostFacts& facts, Summary& summary);

// Writes /instances (one row per instance: requests, prompt and cached tokens,
// hit rate, busy seconds, utilisation, TTFT p50/p90, E2E p50; with several
// pools also its pool and prefill hand-offs), /pools when there are several pools
// (name, role, size, GPUs, busy and GPU seconds, utilisation, mean KV usage,
// mean batch size) and, when sampled, /instance_samples (t, instance, kv_usage,
// num_waiting, num_running).
void write_fleet_tables(ResultsFile& file, const RunRecorder& rec, const FleetCostFacts& facts, double duration_s);

}  // namespace testbed
