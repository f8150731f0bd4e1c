#!/usr/bin/env bash
# FlashAttention: time our tiled prefill and paged decode kernels against the naive
# (materialised S and P) baseline on the GPU, writing the benchmark's CSV tables:
#   results/flashattention/{prefill,decode}_profile.csv, copy_bandwidth.csv
# Needs a CUDA build (nvcc found at configure time) and a CUDA device; without one
# the benchmark says "SKIP: no CUDA device" and this script exits 77 having written
# nothing. Run from the repository root after building:
#   bash papers/flashattention/run.sh
#   /usr/bin/python3 papers/flashattention/plot.py     # the analytical memory figure always;
#                                                     # the timings when the CSVs exist
# Environment: BENCH (default ./build/kernels/bench_attention), MIN_TIME (default 0.05 s).
set -euo pipefail
BENCH=${BENCH:-./build/kernels/bench_attention}
out=results/flashattention
[[ -x $BENCH ]] || { echo "error: $BENCH not found: a CUDA build is needed (see README.md, GPU)" >&2; exit 1; }
mkdir -p "$out.tmp"
status=0
"$BENCH" --benchmark_filter='prefill|naive|decode' --benchmark_min_time="${MIN_TIME:-0.05}" \
  --profile_dir="$out.tmp" || status=$?
if [[ $status -ne 0 ]]; then
  rm -rf "$out.tmp"
  exit $status  # 77: no CUDA device, nothing measured
fi
rm -rf "$out" && mv "$out.tmp" "$out"
echo "profiles in $out/; plot: /usr/bin/python3 papers/flashattention/plot.py"
