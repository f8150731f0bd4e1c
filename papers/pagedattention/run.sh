#!/usr/bin/env bash
# PagedAttention (Kwon et al., SOSP '23): KV reserved per request as before paging,
# against paged blocks. Two sweeps (testbed sweep; one `testbed run` per point):
#   load.ini      5 allocators x 2 KV capacities x 9 rates -> results/pagedattention/load/
#   capacity.ini  the highest rate at median normalized latency <= 0.1 s, by bisection
#                 -> results/pagedattention/capacity/
# About 10 s on two cores. Run from the repository root after building:
#   bash papers/pagedattention/run.sh
#   /usr/bin/python3 papers/pagedattention/plot.py
# Environment: TESTBED (default ./build/testbed), JOBS (points at once; default every core),
# TRACE (default ../shared/traces/azure2023_conv.csv), FORCE=1 (rerun every point).
set -euo pipefail
TESTBED=${TESTBED:-./build/testbed}
trace=${TRACE:-../shared/traces/azure2023_conv.csv}
out=results/pagedattention
[[ -x $TESTBED ]] || { echo "error: $TESTBED not found; build first (see README.md)" >&2; exit 1; }
[[ -f papers/pagedattention/load.ini ]] || { echo "error: run from the repository root" >&2; exit 1; }
[[ -f $trace ]] || { echo "error: trace $trace not found; set TRACE" >&2; exit 1; }
jobs=()
[[ -n ${JOBS:-} ]] && jobs=(--jobs "$JOBS")
status=0
for section in load capacity; do
  [[ ${FORCE:-0} == 1 ]] && rm -rf "${out:?}/$section"
  "$TESTBED" sweep "papers/pagedattention/$section.ini" --output "$out/$section" "${jobs[@]}" --trace.path="$trace" ||
    status=$?
done
echo "results in $out/{load,capacity}/sweep.h5; plot: /usr/bin/python3 papers/pagedattention/plot.py"
exit $status
