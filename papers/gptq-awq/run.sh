#!/usr/bin/env bash
# GPTQ and AWQ against round-to-nearest: the accuracy cost of 4-bit weights
# (and FP8) on the tiny CPU model, without and with outlier channels, and the
# speed side from the roofline (no GPU has run the W4A16/FP8 kernels yet):
#   bash papers/gptq-awq/run.sh          (from the repository root, after building)
#   /usr/bin/python3 papers/gptq-awq/plot.py
# -> results/gptq-awq/{plain,outliers}/quant_eval.csv, roofline_*.txt. About 3 minutes on two cores.
set -euo pipefail
TESTBED=${TESTBED:-./build/testbed}
out=results/gptq-awq
[[ -x $TESTBED ]] || { echo "error: $TESTBED not found; build first (see README.md)" >&2; exit 1; }
[[ -f papers/gptq-awq/run.sh ]] || { echo "error: run from the repository root" >&2; exit 1; }
mkdir -p "$out"
"$TESTBED" quant-eval experiments/quickstart.ini --tokens 256 --output "$out/plain"
"$TESTBED" quant-eval experiments/quickstart.ini --tokens 256 --outliers 4 --outlier-scale 20 --output "$out/outliers"
for p in auto fp8 w4a16; do
  "$TESTBED" roofline --model experiments/models/llama-3.1-8b.json --hardware experiments/hardware/h100-sxm.ini \
    --precision "$p" > "$out/roofline_8b_$p.txt"
done
echo "results in $out; plot: /usr/bin/python3 papers/gptq-awq/plot.py"
