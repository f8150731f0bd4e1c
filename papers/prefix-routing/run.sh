#!/usr/bin/env bash
# Prefix-cache-aware routing vs cache-blind balancers: every run of
# papers/prefix-routing/README.md. Only CLI calls with the configs in
# experiments/ and --key=value overrides; results in results/prefix-routing/.
#
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2
#   papers/prefix-routing/run.sh            # everything (~20 min on one core)
#   papers/prefix-routing/run.sh shared mooncake_capacity   # some sections
#   /usr/bin/python3 papers/prefix-routing/plot.py
#
# Sections: shared shared_load shared_prefixes staleness mooncake
#           mooncake_capacity llmd. A run whose results.h5 exists is skipped
# (FORCE=1 reruns it).
set -euo pipefail
cd "$(dirname "$0")/../.."

TESTBED=${TESTBED:-./build/testbed}  # another build: TESTBED=/path/to/testbed run.sh
OUT=results/prefix-routing
ROUTERS="round_robin random least_loaded prefix_approx prefix_precise weighted cache_aware"
mkdir -p "$OUT"

# The full Mooncake conversation trace if this checkout has it, else the sample.
MOONCAKE=../shared/traces/mooncake_conversation.jsonl
if [ ! -f "$MOONCAKE" ]; then
  MOONCAKE=traces/samples/mooncake_conversation_head300.jsonl
  echo "run.sh: ../shared/traces/mooncake_conversation.jsonl is absent: using the 300-line sample" >&2
fi
echo "$MOONCAKE" > "$OUT/mooncake_trace_used.txt"
echo "run.sh: Mooncake trace = $MOONCAKE"

# run NAME CONFIG [--key=value ...]: one CLI run into $OUT/NAME.
run() {
  local name=$1 config=$2
  shift 2
  if [ -f "$OUT/$name/results.h5" ] && [ "${FORCE:-0}" != 1 ]; then
    echo "skip $name (exists)"
    return
  fi
  echo "== $name: $TESTBED run $config $*"
  "$TESTBED" run "$config" --output "$OUT/$name" --driver.progress=off "$@" | grep -E "^(requests|prefix hits|TTFT|simulated)"
}

# 1. Shared-prompt workload (16 x Llama-3.1-8B / H100, 128 x 8,400-token
#    prompts + 3,600 unique, 24 req/s): every router.
section_shared() {
  for r in $ROUTERS; do
    run "shared/$r" experiments/prefix_routing.ini --router.type=$r
  done
}

# 2. The same workload at rising load: TTFT p90 and throughput vs offered
#    rate; 64 req/s overloads every router, so its throughput is capacity.
section_shared_load() {
  for rate in 12 24 36 48 64; do
    for r in $ROUTERS; do
      run "shared_load/rate$rate/$r" experiments/prefix_routing.ini --router.type=$r \
        --workload.rate=$rate --workload.num_requests=10000
    done
  done
}

# 3. Regime: how many distinct system prompts (1 .. 1024 x 8,400 tokens) vs
#    one instance's 448k-token cache and the fleet's 7.2M.
section_shared_prefixes() {
  for p in 1 4 16 64 128 256 512 1024; do
    for r in round_robin least_loaded prefix_approx prefix_precise weighted cache_aware; do
      run "shared_prefixes/p$p/$r" experiments/prefix_routing.ini --router.type=$r \
        --workload.num_prefixes=$p --workload.num_requests=10000
    done
  done
}

# 4. Staleness: the approximate router's memory vs what instances really keep.
#    1,024 prompts (8.6M tokens) overflow the fleet's caches, so instances
#    evict what the router still believes cached. The router remembers 0.1x,
#    1x (the default) or 10x an instance's 28,020 blocks: too little forgets
#    what is cached, too much believes in what was evicted.
section_staleness() {
  for cap in 2802 28020 280200; do
    run "staleness/prefix_approx_cap$cap" experiments/prefix_routing.ini --router.type=prefix_approx \
      --workload.num_prefixes=1024 --workload.num_requests=10000 --router.approx_capacity_blocks=$cap
  done
}

# 5. Mooncake conversation trace (8 x Llama-3.1-8B / H100): every router, at
#    the trace's own arrival times and at twice its rate.
section_mooncake() {
  for scale in 1.0 0.5; do
    for r in $ROUTERS; do
      run "mooncake/scale$scale/$r" experiments/prefix_routing_mooncake.ini --router.type=$r \
        --trace.path="$MOONCAKE" --trace.time_scale=$scale
    done
  done
}

# 6. Mooncake Figure 9 shape: ONE instance, hit rate vs KV capacity, from a
#    third of an H100's cache to more than the whole trace (9.5M blocks =
#    152M tokens > the trace's 144.8M prompt + 4.1M output tokens: unbounded). Arrivals
#    slowed 10x so the running batch holds little of the cache.
section_mooncake_capacity() {
  for nb in 10000 28020 56040 112080 224160 448320 896640 1793280 3586560 9500000; do
    run "mooncake_capacity/blocks$nb" experiments/prefix_routing_mooncake.ini --fleet.num_instances=1 \
      --cache.num_blocks=$nb --trace.path="$MOONCAKE" --trace.time_scale=10
  done
}

# 7. llm-d's benchmark workload (8 x Qwen3-32B TP2 / H100): every router over
#    a rate ramp, as llm-d's inference-perf stages do.
section_llmd() {
  for rate in 3 4 5 6 8 10 12 16 20; do
    for r in $ROUTERS; do
      run "llmd/rate$rate/$r" experiments/prefix_routing_llmd.ini --router.type=$r \
        --workload.rate=$rate --workload.num_requests=3000
    done
  done
}

sections=${*:-shared shared_load shared_prefixes staleness mooncake mooncake_capacity llmd}
for s in $sections; do
  "section_$s"
done
