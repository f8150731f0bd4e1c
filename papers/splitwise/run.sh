#!/usr/bin/env bash
# Splitwise (Patel et al., ISCA '24): prompt and token phases on separate machines,
# homogeneous (H100 + H100) or mixed (H100 prompt + A100 or H200 token machines),
# sized to the cost or the power of 8 unified H100 machines. Llama-3.1-70B, TP 8 per
# machine, roofline; the Azure LLM 2023 conversation and code traces' lengths. Per
# trace, two sweeps (testbed sweep; one `testbed run` per point):
#   goodput_unified.ini   8 unified H100 machines, whole prompts or chunks of 512
#   goodput_split.ini     19 split designs (equal cost / equal power)
# each a bisection for the highest rate meeting the SLO, at a strict and a relaxed SLO
# -> results/splitwise/<trace>/<sweep>/. About a minute on two cores. Run from the
# repository root after building:
#   bash papers/splitwise/run.sh
#   /usr/bin/python3 papers/splitwise/plot.py
# Environment: TESTBED (default ./build/testbed), JOBS (points at once; default every core),
# TRACES (default ../shared/traces), FORCE=1 (rerun every point).
set -euo pipefail
TESTBED=${TESTBED:-./build/testbed}
traces=${TRACES:-../shared/traces}
out=results/splitwise
[[ -x $TESTBED ]] || { echo "error: $TESTBED not found; build first (see README.md)" >&2; exit 1; }
[[ -f papers/splitwise/goodput_split.ini ]] || { echo "error: run from the repository root" >&2; exit 1; }
jobs=()
[[ -n ${JOBS:-} ]] && jobs=(--jobs "$JOBS")
status=0
for trace in conv code; do
  csv=$traces/azure2023_$trace.csv
  [[ -f $csv ]] || { echo "error: trace $csv not found; set TRACES" >&2; exit 1; }
  for section in goodput_unified goodput_split; do
    [[ ${FORCE:-0} == 1 ]] && rm -rf "${out:?}/$trace/$section"
    "$TESTBED" sweep "papers/splitwise/$section.ini" --output "$out/$trace/$section" "${jobs[@]}" \
      --trace.path="$csv" || status=$?
  done
done
echo "results in $out/{conv,code}/*/sweep.h5; plot: /usr/bin/python3 papers/splitwise/plot.py"
exit $status
