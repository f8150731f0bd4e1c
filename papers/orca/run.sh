#!/usr/bin/env bash
# Orca (OSDI '22): iteration-level (fcfs) vs request-level (static) batching, swept over
# the request rate at equal max_num_seqs (16, 64, 256). Each section is a sweep file here,
# run by `testbed sweep` (one `testbed run` per point, merged into DIR/sweep.h5):
#   load.ini   3 batch limits x 2 policies x 15 rates -> results/orca/load/
#   steps.ini  saturated runs (16 req/s) with the per-step table -> results/orca/steps/
# Each point is a few tenths of a second of simulation. Run from the repository root after
# building:
#   bash papers/orca/run.sh
#   /usr/bin/python3 papers/orca/plot.py
# Environment:
#   TESTBED=path     the testbed binary (default ./build/testbed)
#   JOBS=N           points at once (testbed sweep --jobs; default: every core)
#   ORCA_TRACE=path  the Azure conversation trace (default ../shared/traces/azure2023_conv.csv);
#                    the 300-row sample (too few requests for stable tails):
#                    ORCA_TRACE=traces/samples/azure2023_conv_head300.csv
#   FORCE=1          delete results/orca/<section>/ first and rerun every point
# A sweep skips the points whose results are complete, so an interrupted run resumes.
set -euo pipefail

TESTBED=${TESTBED:-./build/testbed}
trace=${ORCA_TRACE:-../shared/traces/azure2023_conv.csv}
out=results/orca

[[ -x $TESTBED ]] || { echo "error: $TESTBED not found; build first (see README.md)" >&2; exit 1; }
[[ -f papers/orca/load.ini ]] || { echo "error: run from the repository root (papers/orca/load.ini not found)" >&2; exit 1; }
[[ -f $trace ]] || { echo "error: trace $trace not found; set ORCA_TRACE (see traces/samples/)" >&2; exit 1; }

jobs=()
[[ -n ${JOBS:-} ]] && jobs=(--jobs "$JOBS")

status=0  # a sweep with failed points (listed by testbed sweep) does not stop the other
for section in load steps; do
  [[ ${FORCE:-0} == 1 ]] && rm -rf "${out:?}/$section"
  "$TESTBED" sweep "papers/orca/$section.ini" --output "$out/$section" "${jobs[@]}" --trace.path="$trace" || status=$?
done
echo "results in $out/{load,steps}/sweep.h5; plot: /usr/bin/python3 papers/orca/plot.py"
exit $status
