#!/usr/bin/env bash
# DistServe (Zhong et al., OSDI '24): prefill/decode disaggregation against colocation,
# by goodput (the highest rate at which >= 90% of requests meet both the TTFT and the
# TPOT SLO). Llama-3.1-8B on H100s (roofline), the Azure LLM 2023 conversation and code
# traces' lengths. Per trace, six sweeps (testbed sweep; one `testbed run` per point):
#   goodput_{colocated,disagg}.ini     2 GPUs: goodput at 7 SLO scales (bisection on the rate)
#   attainment_{colocated,disagg}.ini  2 GPUs: SLO attainment and tail latencies over 20 rates
#   placement_{colocated,disagg}.ini   4 GPUs: 4 unified vs 1P3D / 2P2D / 3P1D / TP2 prefill + 2D
# -> results/distserve/<trace>/<sweep>/. About a minute on two cores. Run from the
# repository root after building:
#   bash papers/distserve/run.sh
#   /usr/bin/python3 papers/distserve/plot.py
# Environment: TESTBED (default ./build/testbed), JOBS (points at once; default every core),
# TRACES (default ../shared/traces), FORCE=1 (rerun every point).
set -euo pipefail
TESTBED=${TESTBED:-./build/testbed}
traces=${TRACES:-../shared/traces}
out=results/distserve
[[ -x $TESTBED ]] || { echo "error: $TESTBED not found; build first (see README.md)" >&2; exit 1; }
[[ -f papers/distserve/goodput_colocated.ini ]] || { echo "error: run from the repository root" >&2; exit 1; }
jobs=()
[[ -n ${JOBS:-} ]] && jobs=(--jobs "$JOBS")
status=0
for trace in conv code; do
  csv=$traces/azure2023_$trace.csv
  [[ -f $csv ]] || { echo "error: trace $csv not found; set TRACES" >&2; exit 1; }
  for section in goodput_colocated goodput_disagg attainment_colocated attainment_disagg \
                 placement_colocated placement_disagg; do
    [[ ${FORCE:-0} == 1 ]] && rm -rf "${out:?}/$trace/$section"
    "$TESTBED" sweep "papers/distserve/$section.ini" --output "$out/$trace/$section" "${jobs[@]}" \
      --trace.path="$csv" || status=$?
  done
done
echo "results in $out/{conv,code}/*/sweep.h5; plot: /usr/bin/python3 papers/distserve/plot.py"
exit $status
