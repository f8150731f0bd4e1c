#include "engine/metrics/units.h"

#include <stdexcept>

namespace testbed {

const std::vector<MetricDoc>& summary_docs() {
  static const std::vector<MetricDoc> docs = {
      // Requests
      {"num_requests", "requests", "requests that arrived (finished + cancelled + lost + rejected)"},
      {"num_finished", "requests", "requests that finished (ingress-cache answers included)"},
      {"num_cancelled", "requests", "requests whose client left before the end (workload.cancel_*)"},
      {"num_lost", "requests", "requests lost with a failed instance (fault.on_failure = lose)"},
      {"num_rejected", "requests", "requests that could never run, rejected on arrival (trace.on_invalid = reject)"},
      {"cancelled_output_tokens", "tokens", "output tokens generated for requests that were then cancelled"},
      {"restarts", "count", "restarts of finished requests after instance failures (recomputed elsewhere)"},
      {"preemptions", "count", "preemptions of finished requests (recompute: the sequence starts over)"},
      // Tokens and the prefix cache
      {"duration_s", "s", "first arrival to last finish"},
      {"prompt_tokens", "tokens", "prompt tokens of finished requests"},
      {"cached_tokens", "tokens", "of those, tokens served from the prefix cache (not prefilled)"},
      {"output_tokens", "tokens", "output tokens of finished requests"},
      {"prefix_hit_rate", "1", "cached_tokens / prompt_tokens"},
      {"request_hit_share", "1", "share of finished requests with any prefix-cache hit"},
      // Latency (finished requests; ITL over every inter-token gap)
      {"ttft_mean_s", "s", "time to first token, mean (arrival to the end of the step that emits it)"},
      {"ttft_p50_s", "s", "time to first token, median"},
      {"ttft_p90_s", "s", "time to first token, 90th percentile"},
      {"ttft_p95_s", "s", "time to first token, 95th percentile"},
      {"ttft_p99_s", "s", "time to first token, 99th percentile"},
      {"tpot_mean_s", "s", "time per output token after the first, (finish - first token) / (output - 1), mean"},
      {"tpot_p50_s", "s", "time per output token, median"},
      {"tpot_p90_s", "s", "time per output token, 90th percentile"},
      {"tpot_p95_s", "s", "time per output token, 95th percentile"},
      {"tpot_p99_s", "s", "time per output token, 99th percentile"},
      {"e2e_mean_s", "s", "end-to-end latency (arrival to finish), mean"},
      {"e2e_p50_s", "s", "end-to-end latency, median"},
      {"e2e_p90_s", "s", "end-to-end latency, 90th percentile"},
      {"e2e_p95_s", "s", "end-to-end latency, 95th percentile"},
      {"e2e_p99_s", "s", "end-to-end latency, 99th percentile"},
      {"normalized_latency_mean_s", "s", "E2E / output tokens, mean (Orca's and vLLM's metric)"},
      {"normalized_latency_p50_s", "s", "E2E / output tokens, median"},
      {"normalized_latency_p90_s", "s", "E2E / output tokens, 90th percentile"},
      {"normalized_latency_p95_s", "s", "E2E / output tokens, 95th percentile"},
      {"normalized_latency_p99_s", "s", "E2E / output tokens, 99th percentile"},
      {"itl_mean_s", "s", "inter-token latency (every gap between a request's tokens), mean"},
      {"itl_p50_s", "s", "inter-token latency, median (from /itl, bins 0.8% wide)"},
      {"itl_p90_s", "s", "inter-token latency, 90th percentile"},
      {"itl_p99_s", "s", "inter-token latency, 99th percentile"},
      // Throughput and SLOs
      {"throughput_tok_s", "tok/s", "output_tokens / duration_s"},
      {"request_throughput_rps", "req/s", "num_finished / duration_s"},
      {"goodput_rps", "req/s", "finished requests meeting both slo.ttft_s and slo.tpot_s, per second"},
      {"slo_attainment", "1", "share of finished requests meeting both SLO targets"},
      {"meets_slo", "bool", "1 when slo_attainment >= slo.attainment (DistServe's goodput test)"},
      // Steps and the KV cache
      {"num_steps", "steps", "engine steps, every instance's"},
      {"batch_size_mean", "seqs", "sequences per step, weighted by step time (busy steps)"},
      {"kv_waste_mean", "1", "share of allocated KV slots holding no token, time-weighted (reservation, partial blocks)"},
      {"kv_blocks_stored", "blocks", "KV blocks published to the prefix cache (KV events BlockStored)"},
      {"kv_blocks_removed", "blocks", "KV blocks evicted from it (BlockRemoved)"},
      {"num_instances", "instances", "engine instances (every pool's)"},
      // Fleet, cost and energy
      {"load_imbalance_requests", "1", "max / mean of requests per instance (1: even)"},
      {"load_imbalance_busy", "1", "max / mean of busy seconds per instance (1: even)"},
      {"gpu_seconds", "GPU-s", "GPU-seconds paid: GPUs x duration (with autoscaling: the replicas paid for)"},
      {"busy_gpu_seconds", "GPU-s", "GPU-seconds spent in steps"},
      {"busy_gpu_seconds_per_request", "GPU-s", "busy_gpu_seconds / num_finished"},
      {"replicas_mean", "instances", "instances paid for, time-weighted (autoscaled runs)"},
      {"prefill_flops_avoided", "FLOP", "cached_tokens x 2 x active parameters: prefill the prefix cache saved"},
      {"requests_per_day", "req/day", "the rate the per-day figures assume (metrics.requests_per_day)"},
      {"gpu_hours_per_day", "GPU-h/day", "busy_gpu_seconds_per_request x requests_per_day / 3600"},
      {"gpu_hours_saved_per_day", "GPU-h/day", "prefill GPU-hours per day the prefix cache saves at requests_per_day"},
      {"cost_usd", "USD", "paid GPU-hours x each pool's hardware price (when every spec states one)"},
      {"usd_per_million_output_tokens", "USD/Mtok", "cost_usd per million output tokens"},
      {"usd_per_request", "USD", "cost_usd / num_finished: cost per generation"},
      {"energy_kwh", "kWh", "paid GPU-hours x TDP (when every spec states one)"},
      {"output_tokens_per_kwh", "tok/kWh", "output_tokens / energy_kwh"},
      {"pool_<NAME>_utilization", "1", "pool NAME's busy share of its paid instance time (runs with pools)"},
      {"pool_<NAME>_kv_usage_mean", "1", "pool NAME's KV-cache usage, time-weighted"},
      {"pool_<NAME>_batch_size_mean", "seqs", "pool NAME's sequences per step, weighted by step time"},
      {"pool_<NAME>_gpu_seconds", "GPU-s", "pool NAME's paid GPU-seconds"},
      // Prefill/decode disaggregation
      {"handoff_wait_mean_s", "s", "prefill end to decode admission, mean (disaggregated runs)"},
      {"handoff_wait_p99_s", "s", "prefill end to decode admission, 99th percentile"},
      {"transfer_mean_s", "s", "KV transfer time per request, mean"},
      {"transfer_p99_s", "s", "KV transfer time per request, 99th percentile"},
      {"transfer_gb", "GB", "KV bytes moved between pools / 1e9"},
      {"transfer_reused_share", "1", "share of handed-off blocks the decode side already held (not moved)"},
      // Ingress (semantic cache, model routing)
      {"ingress_exact_hit_rate", "1", "share of requests the ingress cache answered by an exact prompt match"},
      {"ingress_semantic_hit_rate", "1", "share answered by a nearest neighbour at cos >= ingress.semantic_tau"},
      {"ingress_false_hit_rate", "1", "share answered with another intent's answer (a wrong answer)"},
      {"ingress_gpu_seconds_saved", "GPU-s", "cache answers x an engine-served request's mean busy GPU-seconds"},
      {"ingress_lookup_mean_s", "s", "embedding + lookup per request, measured (wall-clock runs), mean"},
      {"ingress_lookup_p99_s", "s", "embedding + lookup per request, 99th percentile"},
      {"routed_below_class_share", "1", "share of routed requests sent to a model below their class"},
      {"routed_above_class_share", "1", "share sent to a model above their class"},
      {"quality_failure_rate", "1", "share of routed requests failing in quality (served below class)"},
      // Speculative decoding
      {"spec_acceptance_rate", "1", "accepted / drafted tokens"},
      {"spec_tokens_per_step", "tokens", "tokens a decoding sequence gains per step"},
      // testbed fidelity (the real run's /summary, with the comparison added)
      {"real_runs", "count", "fidelity: real runs of the config (--repeats)"},
      {"err_<M>", "1", "fidelity: (simulated - real median) / real median of M (ttft_mean, ttft_p99, tpot_mean, "
                       "tpot_p99, e2e_mean, e2e_p99)"},
      {"real_<M>_median", "s", "fidelity: median of M over the real runs"},
      {"real_<M>_min", "s", "fidelity: least M of the real runs"},
      {"real_<M>_max", "s", "fidelity: greatest M of the real runs"},
      {"real_<M>_spread", "1", "fidelity: (max - min) / median of M"},
      {"in_real_range_<M>", "bool", "fidelity: 1 when the simulated M lies within the real runs' range"},
      {"median_abs_err_<C>", "1", "fidelity --measured: median |relative error| of column C over the points"},
      {"max_abs_err_<C>", "1", "fidelity --measured: largest |relative error| of column C"},
  };
  return docs;
}

namespace {

// Whether `key` is `pattern` with each <...> standing for one or more characters.
bool matches(const std::string& pattern, size_t p, const std::string& key, size_t k) {
  if (p == pattern.size()) return k == key.size();
  if (pattern[p] == '<') {
    const size_t close = pattern.find('>', p);
    for (size_t end = k + 1; end <= key.size(); ++end)
      if (matches(pattern, close + 1, key, end)) return true;
    return false;
  }
  return k < key.size() && pattern[p] == key[k] && matches(pattern, p + 1, key, k + 1);
}

const MetricDoc* find_doc(const std::vector<MetricDoc>& docs, const std::string& key) {
  for (const MetricDoc& d : docs)
    if (d.name == key) return &d;
  for (const MetricDoc& d : docs)
    if (d.name.find('<') != std::string::npos && matches(d.name, 0, key, 0)) return &d;
  return nullptr;
}

}  // namespace

bool is_documented_summary_key(const std::string& key) { return find_doc(summary_docs(), key) != nullptr; }

std::string summary_unit(const std::string& key) {
  const MetricDoc* d = find_doc(summary_docs(), key);
  if (!d) throw std::logic_error("summary key '" + key + "' is not documented (engine/metrics/units.cpp)");
  return d->unit;
}

const std::vector<TableDoc>& table_docs() {
  static const std::vector<TableDoc> docs = {
      {"requests",
       {{"id", "id", "request id (the trace's order)"},
        {"instance", "id", "instance that served it (-1: answered by the ingress cache)"},
        {"arrival_s", "s", "arrival time"},
        {"first_token_s", "s", "time of its first output token"},
        {"finish_s", "s", "time of its last output token"},
        {"ttft_s", "s", "first_token_s - arrival_s"},
        {"tpot_s", "s", "(finish_s - first_token_s) / (output_tokens - 1)"},
        {"e2e_s", "s", "finish_s - arrival_s"},
        {"prompt_tokens", "tokens", "prompt length"},
        {"cached_tokens", "tokens", "prompt tokens served from the prefix cache"},
        {"output_tokens", "tokens", "tokens generated"},
        {"preemptions", "count", "times it was preempted"},
        {"answered_by", "code", "ingress cache: 0 engine, 1 exact match, 2 semantic match"},
        {"false_hit", "bool", "ingress cache: answered with another intent's answer"},
        {"ingress_s", "s", "measured embedding + lookup (-1: not looked up)"},
        {"request_class", "id", "model routing: its true class"},
        {"routed_class", "id", "model routing: the class it was routed to"},
        {"quality_failure", "bool", "model routing: failed in quality (served below class)"},
        {"restarts", "count", "restarts after instance failures"},
        {"spec_drafted", "tokens", "speculative decoding: tokens drafted for it"},
        {"spec_accepted", "tokens", "of those, accepted"},
        {"spec_steps", "steps", "steps that verified its drafts"},
        {"prefill_instance", "id", "disaggregated: the prefill instance"},
        {"handoff_wait_s", "s", "disaggregated: prefill end to decode admission"},
        {"transfer_s", "s", "disaggregated: KV transfer time"},
        {"transfer_bytes", "bytes", "disaggregated: KV bytes moved"},
        {"transfer_blocks", "blocks", "disaggregated: KV blocks moved"},
        {"reused_blocks", "blocks", "disaggregated: blocks the decode side already held"}}},
      {"cancelled",
       {{"id", "id", "request id"},
        {"instance", "id", "instance it was on (-1: none yet)"},
        {"arrival_s", "s", "arrival time"},
        {"cancel_s", "s", "time it ended"},
        {"first_token_s", "s", "time of its first token (-1: none)"},
        {"prompt_tokens", "tokens", "prompt length"},
        {"output_tokens", "tokens", "tokens generated before it ended"},
        {"reason", "code", "0 deadline (client left), 1 token count reached, 2 lost with an instance, 3 rejected"}}},
      {"steps",
       {{"instance", "id", "instance"},
        {"start_s", "s", "step start"},
        {"duration_s", "s", "step duration"},
        {"num_seqs", "seqs", "sequences in the step"},
        {"prefill_tokens", "tokens", "prompt tokens prefilled"},
        {"decode_tokens", "tokens", "decode positions"},
        {"kv_blocks_used", "blocks", "KV blocks in use after the step"},
        {"kv_tokens", "tokens", "tokens held in the KV cache after the step"},
        {"num_preempted", "seqs", "sequences preempted by the step's scheduling"},
        {"num_waiting", "seqs", "sequences waiting after the step"},
        {"num_running", "seqs", "sequences running after the step"}}},
      {"itl",
       {{"itl_s", "s", "inter-token gap, a bin's value (bins 0.8% wide)"}, {"count", "count", "gaps in the bin"}}},
      {"autoscale",
       {{"t", "s", "evaluation time"},
        {"pool", "id", "pool index"},
        {"active", "instances", "replicas serving"},
        {"starting", "instances", "replicas starting (not yet serving)"},
        {"draining", "instances", "replicas draining before removal"},
        {"desired", "instances", "the policy's recommendation"},
        {"signal", "signal", "the value of the signal autoscale.signal names (the unit of its column here)"},
        {"queue_depth", "seqs", "waiting sequences per replica, mean over the window"},
        {"active_seqs", "seqs", "running sequences per replica, mean over the window"},
        {"kv_usage", "1", "KV-cache usage, mean over active replicas"},
        {"gpu_util", "1", "busy share over the window"},
        {"cpu_util", "1", "the CPU-like proxy over the window"},
        {"request_rate", "req/s", "arrivals per second over the window"},
        {"ttft_p95_s", "s", "TTFT p95 over the window"}}},
      {"events",
       {{"t", "s", "event time"},
        {"event", "text", "arrival, route, first_token, prefill_done, decode_route, transfer_start, transfer_done, "
                          "finish, cancel, fail, replica_start, replica_ready, replica_drain, replica_off, cache_answer"},
        {"request", "id", "request id"},
        {"instance", "id", "instance"},
        {"bytes", "bytes", "bytes moved (transfers), else 0"}}},
      {"tokens",
       {{"request_id", "id", "request id, one per request"},
        {"offsets", "count", "start of each request's tokens in ids (one more than requests)"},
        {"ids", "id", "generated token ids, every request's in turn"}}},
      {"instances",
       {{"instance", "id", "instance"},
        {"requests", "requests", "requests it served"},
        {"prompt_tokens", "tokens", "their prompt tokens"},
        {"cached_tokens", "tokens", "of those, from its prefix cache"},
        {"prefix_hit_rate", "1", "cached_tokens / prompt_tokens"},
        {"busy_s", "s", "time in steps"},
        {"utilization", "1", "busy_s / the time it was paid for"},
        {"ttft_p50_s", "s", "TTFT of its requests, median"},
        {"ttft_p90_s", "s", "TTFT of its requests, 90th percentile"},
        {"e2e_p50_s", "s", "E2E of its requests, median"},
        {"pool", "id", "its pool's index (runs with pools)"},
        {"prefilled", "requests", "requests it prefilled (runs with pools)"}}},
      {"pools",
       {{"name", "text", "pool name"},
        {"role", "text", "unified, prefill or decode"},
        {"hardware", "text", "hardware spec"},
        {"size", "instances", "instances"},
        {"gpus_per_instance", "count", "GPUs per instance (tensor parallel)"},
        {"kv_blocks_per_instance", "blocks", "KV blocks per instance"},
        {"busy_s", "s", "time in steps, every instance's"},
        {"gpu_seconds", "GPU-s", "paid GPU-seconds"},
        {"utilization", "1", "busy share of the paid instance time"},
        {"kv_usage_mean", "1", "KV-cache usage, time-weighted"},
        {"batch_size_mean", "seqs", "sequences per step, weighted by step time"}}},
      {"instance_samples",
       {{"t", "s", "sample time (every fleet.sample_interval_s)"},
        {"instance", "id", "instance"},
        {"kv_usage", "1", "KV-cache usage"},
        {"num_waiting", "seqs", "sequences waiting"},
        {"num_running", "seqs", "sequences running"}}},
      {"profile",
       {{"prefill_tokens", "tokens", "prefill tokens of the grid point"},
        {"decode_seqs", "seqs", "decoding sequences of the grid point"},
        {"context", "tokens", "context of each sequence"},
        {"step_s", "s", "measured step time (median of --repeats)"}}},
      {"real_runs",
       {{"ttft_mean_s", "s", "fidelity: each real run's ttft_mean_s"},
        {"ttft_p99_s", "s", "fidelity: each real run's ttft_p99_s"},
        {"tpot_mean_s", "s", "fidelity: each real run's tpot_mean_s"},
        {"tpot_p99_s", "s", "fidelity: each real run's tpot_p99_s"},
        {"e2e_mean_s", "s", "fidelity: each real run's e2e_mean_s"},
        {"e2e_p99_s", "s", "fidelity: each real run's e2e_p99_s"}}},
  };
  return docs;
}

std::string column_unit(const std::string& group, const std::string& column) {
  for (const TableDoc& t : table_docs())
    if (t.group == group)
      if (const MetricDoc* d = find_doc(t.columns, column)) return d->unit;
  throw std::logic_error("column /" + group + "/" + column + " is not documented (engine/metrics/units.cpp)");
}

}  // namespace testbed
