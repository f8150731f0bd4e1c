#!/usr/bin/env bash
# Sarathi-Serve (Agrawal et al., OSDI '24): chunked prefill with stall-free batching
# against whole-prompt prefill, on two traces' lengths (the Azure LLM 2023 conversation
# trace, decode-heavy, and the code trace, prompt-heavy). Per trace, three sweeps
# (testbed sweep; one `testbed run` per point):
#   tradeoff.ini          6 prefill settings x 6 rates -> results/sarathi-serve/<trace>/tradeoff/
#   capacity_strict.ini   highest rate with P99 ITL <= 36 ms and median TTFT <= 2 s
#   capacity_relaxed.ini  the same with P99 ITL <= 180 ms
# About a minute on two cores. Run from the repository root after building:
#   bash papers/sarathi-serve/run.sh
#   /usr/bin/python3 papers/sarathi-serve/plot.py
# Environment: TESTBED (default ./build/testbed), JOBS (points at once; default every core),
# TRACES (default ../shared/traces), FORCE=1 (rerun every point).
set -euo pipefail
TESTBED=${TESTBED:-./build/testbed}
traces=${TRACES:-../shared/traces}
out=results/sarathi-serve
[[ -x $TESTBED ]] || { echo "error: $TESTBED not found; build first (see README.md)" >&2; exit 1; }
[[ -f papers/sarathi-serve/tradeoff.ini ]] || { echo "error: run from the repository root" >&2; exit 1; }
jobs=()
[[ -n ${JOBS:-} ]] && jobs=(--jobs "$JOBS")
status=0
for trace in conv code; do
  csv=$traces/azure2023_$trace.csv
  [[ -f $csv ]] || { echo "error: trace $csv not found; set TRACES" >&2; exit 1; }
  for section in tradeoff capacity_strict capacity_relaxed; do
    [[ ${FORCE:-0} == 1 ]] && rm -rf "${out:?}/$trace/$section"
    "$TESTBED" sweep "papers/sarathi-serve/$section.ini" --output "$out/$trace/$section" "${jobs[@]}" \
      --trace.path="$csv" || status=$?
  done
done
echo "results in $out/{conv,code}/*/sweep.h5; plot: /usr/bin/python3 papers/sarathi-serve/plot.py"
exit $status
