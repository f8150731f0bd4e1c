#!/usr/bin/env bash
# Speculative decoding (Leviathan, Kalman, Matias, ICML 2023): tokens per step against the
# closed form, the n-gram proposer's wall-time speed-up on the CPU, and the simulated
# speed-up against batch size. Sweeps (testbed sweep; one `testbed run` per point):
#   tokens_per_step.ini       simulated 8B: acceptance x k x output length  -> tokens_per_step/
#   batch_{8b,70b}.ini        simulated speculation (A = 0.5, 0.7, 0.7 + guard) over batch size
#   batch_{8b,70b}_plain.ini  the same batch sizes decoded plainly          -> batch_*/
#   cpu.ini                   tiny model on the CPU, plain vs ngram k = 1, 2, 4, 8 on three
#                             workloads, timed: run twice, one point at a time -> cpu/rep{1,2}/
# -> results/speculative-decoding/. About 80 s on two cores, 75 s of it the CPU runs.
# Run from the repository root after building:
#   bash papers/speculative-decoding/run.sh
#   /usr/bin/python3 papers/speculative-decoding/plot.py
# Environment: TESTBED (default ./build/testbed), JOBS (simulated points at once; default every
# core; the CPU points always run one at a time), FORCE=1 (rerun every point), SKIP_CPU=1 (only
# the simulated sweeps).
set -euo pipefail
TESTBED=${TESTBED:-./build/testbed}
out=results/speculative-decoding
here=papers/speculative-decoding
[[ -x $TESTBED ]] || { echo "error: $TESTBED not found; build first (see README.md)" >&2; exit 1; }
[[ -f $here/tokens_per_step.ini ]] || { echo "error: run from the repository root" >&2; exit 1; }
jobs=()
[[ -n ${JOBS:-} ]] && jobs=(--jobs "$JOBS")
status=0
sweep() {  # sweep NAME OUTPUT [options]
  local name=$1 dir=$out/$2
  shift 2
  [[ ${FORCE:-0} == 1 ]] && rm -rf "${dir:?}"
  "$TESTBED" sweep "$here/$name.ini" --output "$dir" "$@" || status=$?
}
sweep tokens_per_step tokens_per_step "${jobs[@]}"
for s in batch_8b batch_8b_plain batch_70b batch_70b_plain; do
  sweep "$s" "$s" "${jobs[@]}"
done
if [[ ${SKIP_CPU:-0} != 1 ]]; then
  # Timed: one point at a time, twice (real CPU timings vary between runs).
  for rep in 1 2; do
    sweep cpu "cpu/rep$rep" --jobs 1
  done
fi
echo "results in $out/*/sweep.h5; plot: /usr/bin/python3 $here/plot.py"
exit $status
