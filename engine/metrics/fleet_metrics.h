// Fleet-level metrics from a run's records: per-instance tables, load
// imbalance, and what the prefix cache saved.
#pragma once

#include <string>

#include "engine/metrics/results_file.h"
#include "engine/metrics/run_recorder.h"
#include "engine/metrics/summary.h"

namespace testbed {

struct FleetCostFacts {
  int num_instances = 1;
  int gpus_per_instance = 1;
  double flops_per_prompt_token = 0.0;  // dense FLOPs of one prefill token (2 x parameters)
  double prefill_s_per_token = 0.0;     // marginal prefill time per token on one instance (0: unknown)
  double requests_per_day = 1e6;        // the stated rate for the per-day figure
};

// Adds to `summary`: load imbalance (max / mean requests and busy time per
// instance), GPU-seconds, prefill FLOPs avoided by cache hits, and GPU-hours per
// day those hits save at the stated request rate.
void add_fleet_metrics(const RunRecorder& rec, const FleetCostFacts& facts, Summary& summary);

// Writes /instances (one row per instance: requests, prompt and cached tokens,
// hit rate, busy seconds, utilisation, TTFT p50/p90, E2E p50) and, when sampled,
// /instance_samples (t, instance, kv_usage, num_waiting, num_running).
void write_fleet_tables(ResultsFile& file, const RunRecorder& rec, int num_instances, double duration_s);

}  // namespace testbed
