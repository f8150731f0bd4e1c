#!/usr/bin/env bash
# Orca (OSDI '22): iteration-level (fcfs) vs request-level (static) batching, swept over
# the request rate at equal max_num_seqs (16, 64, 256). Each run is a few tenths of a
# second of simulation. Run from the repository root after building:
#   bash papers/orca/run.sh            # -> results/orca/b<max_num_seqs>/<policy>/rate-<r>/results.h5
#                                      #    and results/orca/steps/b<max_num_seqs>/<policy>/ (per-step table)
#   /usr/bin/python3 papers/orca/plot.py
# The trace defaults to the full Azure conversation trace at ../shared/traces/; to use the
# 300-row sample instead (too few requests for stable tails): ORCA_TRACE=traces/samples/azure2023_conv_head300.csv
set -euo pipefail

testbed=./build/testbed
config=experiments/orca.ini
trace=${ORCA_TRACE:-../shared/traces/azure2023_conv.csv}
out=results/orca
num_requests=5000
batch_sizes=(16 64 256)
policies=(static fcfs)
rates=(0.25 0.5 1 1.5 2 3 4 5 6 7 8 9 10 12 16)

[[ -x $testbed ]] || { echo "error: $testbed not found; build first (see README.md)" >&2; exit 1; }
[[ -f $config ]] || { echo "error: run from the repository root ($config not found)" >&2; exit 1; }
[[ -f $trace ]] || { echo "error: trace $trace not found; set ORCA_TRACE (see traces/samples/)" >&2; exit 1; }

for b in "${batch_sizes[@]}"; do
  for policy in "${policies[@]}"; do
    for rate in "${rates[@]}"; do
      dir=$out/b$b/$policy/rate-$rate
      "$testbed" run "$config" --output "$dir" --driver.progress=off \
        --trace.path="$trace" --trace.max_requests=$num_requests \
        --scheduler.policy="$policy" --scheduler.max_num_seqs="$b" --workload.rate="$rate" \
        | grep -E '^(requests|throughput)' | sed "s|^|b=$b $policy rate=$rate  |"
    done
  done
done
# Saturated runs with the per-step table, to see where the time goes (plot.py prints it).
for b in 64 256; do
  for policy in "${policies[@]}"; do
    "$testbed" run "$config" --output "$out/steps/b$b/$policy" --driver.progress=off --output.steps=true \
      --trace.path="$trace" --trace.max_requests=$num_requests \
      --scheduler.policy="$policy" --scheduler.max_num_seqs="$b" --workload.rate=16 \
      | grep -E '^throughput' | sed "s|^|steps b=$b $policy rate=16  |"
  done
done
echo "results in $out/ (one results.h5 + config.ini per run); plot: /usr/bin/python3 papers/orca/plot.py"
