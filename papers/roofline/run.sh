#!/usr/bin/env bash
# Decode step time vs batch size (roofline cost model) and the batch size where decode
# turns compute-bound, for Llama-3.1-8B (TP=1) and Llama-3.1-70B (TP=4) on H100 SXM and
# H200. Run from the repository root after building; takes about a second:
#   bash papers/roofline/run.sh        # -> results/roofline/<model>-<gpu>.{csv,txt}
#   /usr/bin/python3 papers/roofline/plot.py
set -euo pipefail

testbed=./build/testbed
out=results/roofline
context=1024                          # cached tokens per decoding sequence for the curves
contexts=(128 256 512 1024 2048 4096 8192)  # for the crossover-vs-context table

[[ -x $testbed ]] || { echo "error: $testbed not found; build first (see README.md)" >&2; exit 1; }
[[ -d experiments/hardware ]] || { echo "error: run from the repository root" >&2; exit 1; }
mkdir -p "$out"

# name  model json  hardware ini  tensor_parallel
runs=(
  "llama-3.1-8b-h100  experiments/models/llama-3.1-8b.json  experiments/hardware/h100-sxm.ini 1"
  "llama-3.1-8b-h200  experiments/models/llama-3.1-8b.json  experiments/hardware/h200.ini     1"
  "llama-3.1-70b-tp4-h100 experiments/models/llama-3.1-70b.json experiments/hardware/h100-sxm.ini 4"
  "llama-3.1-70b-tp4-h200 experiments/models/llama-3.1-70b.json experiments/hardware/h200.ini     4"
)

for run in "${runs[@]}"; do
  read -r name model hardware tp <<<"$run"
  "$testbed" roofline --model "$model" --hardware "$hardware" --tp "$tp" --context "$context" \
    --output "$out/$name.csv" | tee "$out/$name.txt"
  echo
done

# The weight-GEMM crossover does not depend on the context; the whole-step one does.
echo "whole-step crossover B* against context (compute time = memory time over all ops):" | tee "$out/crossover_vs_context.txt"
for run in "${runs[@]}"; do
  read -r name model hardware tp <<<"$run"
  for c in "${contexts[@]}"; do
    b=$("$testbed" roofline --model "$model" --hardware "$hardware" --tp "$tp" --context "$c" \
      | sed -n 's/^ *whole step at context [0-9]* *B\* = //p')
    printf '%-24s context %5d  B* = %s\n' "$name" "$c" "$b" | tee -a "$out/crossover_vs_context.txt"
  done
done
echo "results in $out/ (CSV curves, CLI printouts, crossover_vs_context.txt); plot: /usr/bin/python3 papers/roofline/plot.py"
