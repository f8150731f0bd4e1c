#!/usr/bin/env bash
# Seed 001's latency budget, mechanism by mechanism (papers/latency-budget/README.md).
# Steps 0-4 are sweeps over the replica count, one `testbed run` per point;
# step 5 sizes each pool of the production profile alone (three sweeps) and runs
# the chosen sizes together; step 6 autoscales each pool up to its chosen size.
# Each point is 2-4 s of simulation. Run from the repository root after building:
#   bash papers/latency-budget/run.sh
#   /usr/bin/python3 papers/latency-budget/plot.py
# Environment:
#   TESTBED=path   the testbed binary (default ./build/testbed)
#   JOBS=N         points at once (testbed sweep --jobs; default: every core)
#   TRACE=path     the Azure conversation trace (default ../shared/traces/azure2023_conv.csv)
#   FORCE=1        delete results/latency-budget/ first and rerun every point
set -euo pipefail

TESTBED=${TESTBED:-./build/testbed}
trace=${TRACE:-../shared/traces/azure2023_conv.csv}
out=results/latency-budget

[[ -x $TESTBED ]] || { echo "error: $TESTBED not found; build first (see README.md)" >&2; exit 1; }
[[ -f papers/latency-budget/step0_baseline.ini ]] || { echo "error: run from the repository root" >&2; exit 1; }
[[ -f $trace ]] || { echo "error: trace $trace not found; set TRACE" >&2; exit 1; }
[[ ${FORCE:-0} == 1 ]] && rm -rf "${out:?}"

jobs=()
[[ -n ${JOBS:-} ]] && jobs=(--jobs "$JOBS")
for step in step0_baseline step1_continuous step2_prefix step3_semantic step4_fp8 step5_small step5_medium step5_large; do
  "$TESTBED" sweep "papers/latency-budget/$step.ini" --output "$out/$step" "${jobs[@]}" --trace.path="$trace"
done
# The fewest replicas per pool whose own requests meet the SLO.
read -r -a sizes <<< "$(/usr/bin/python3 papers/latency-budget/plot.py --pool-sizes "$out")"
"$TESTBED" run experiments/production_profile.ini --output "$out/step5_routing" --overwrite --trace.path="$trace" \
  --autoscale.policy=none "${sizes[@]}"
# Step 6: each pool starts at, and may use at most, that many replicas.
initial=("${sizes[@]/.size=/.autoscale.initial_replicas=}")
"$TESTBED" run experiments/production_profile.ini --output "$out/step6_autoscale" --overwrite --trace.path="$trace" \
  "${sizes[@]}" "${initial[@]}"
# Step 6b: autoscaling without model routing, on step 4's one-model fleet (at most its size).
n=$(/usr/bin/python3 papers/latency-budget/plot.py --fleet-size "$out")
"$TESTBED" run experiments/latency_budget.ini --output "$out/step6b_autoscale_one_model" --overwrite --trace.path="$trace" \
  --fleet.num_instances="$n" --autoscale.policy=target --autoscale.signal=active_seqs --autoscale.target=64 \
  --autoscale.initial_replicas="$n"
echo "results in $out/; plot: /usr/bin/python3 papers/latency-budget/plot.py"
