#!/usr/bin/env bash
# GPU check: builds the CUDA kernels for sm_90 in build-gpu/, runs the GPU tests
# (kernels vs CPU references, CudaExecutor vs CpuExecutor), the attention and
# speculative-verification benchmarks, then prints one table against the project's goals:
#   decode  >= 80% of the measured device-to-device copy bandwidth at long contexts (>= 8k keys)
#   prefill >= 300 TFLOP/s, bf16, head_dim 128, causal, >= 4k tokens
# Full logs, the kernel profile CSVs and a step-time profile of the CUDA
# executor (the HDF5 table cost_model.kind = profiled reads) go to ${OUT:-/tmp}/gpu_check/. Designed to
# finish in under 8 minutes on one H200; every stage has its own time limit.
#   experiments/gpu_check.sh            (from the repository root)
set -uo pipefail
cd "$(dirname "$0")/.."
LOG_DIR="${OUT:-/tmp}/gpu_check"
mkdir -p "$LOG_DIR/profile"
JOBS="$(nproc 2>/dev/null || echo 8)"
status=0
stage() { echo "== $1 ($(date +%H:%M:%S))"; }

stage "configure + build (sm_90) -> $LOG_DIR/build.log"
if ! timeout 300 bash -c "cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DTESTBED_CUDA=ON -DTESTBED_BENCHMARKS=ON &&
    cmake --build build-gpu -j$JOBS --target gpu_test_kernels bench_attention bench_verify testbed" > "$LOG_DIR/build.log" 2>&1; then
  tail -30 "$LOG_DIR/build.log"
  echo "BUILD FAILED (see $LOG_DIR/build.log)"
  exit 1
fi
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$LOG_DIR/device.txt" 2>&1 || true
cat "$LOG_DIR/device.txt"

stage "GPU tests -> $LOG_DIR/gpu_tests.log"
timeout 150 build-gpu/tests/gpu_test_kernels --durations yes > "$LOG_DIR/gpu_tests.log" 2>&1
rc=$?
tail -4 "$LOG_DIR/gpu_tests.log"
if [ $rc -eq 77 ]; then
  echo "no CUDA device: nothing to check"
  exit 77
elif [ $rc -ne 0 ]; then
  echo "GPU TESTS FAILED (rc $rc); first failures:"
  grep -m 20 -A 12 "FAILED" "$LOG_DIR/gpu_tests.log" | head -80
  status=1
fi

stage "benchmarks -> $LOG_DIR/bench_attention.log"
timeout 180 build-gpu/kernels/bench_attention --benchmark_min_time=0.05 --profile_dir="$LOG_DIR/profile" \
  --benchmark_out="$LOG_DIR/bench_attention.json" --benchmark_out_format=json > "$LOG_DIR/bench_attention.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  tail -20 "$LOG_DIR/bench_attention.log"
  echo "BENCHMARKS FAILED (rc $rc)"
  status=1
fi
grep -m 1 "copy bandwidth" "$LOG_DIR/bench_attention.log"

stage "verify kernel benchmark -> $LOG_DIR/bench_verify.log"
timeout 90 build-gpu/kernels/bench_verify --benchmark_min_time=0.05 > "$LOG_DIR/bench_verify.log" 2>&1 ||
  { tail -10 "$LOG_DIR/bench_verify.log"; status=1; }
grep -E "^BM_Verify" "$LOG_DIR/bench_verify.log" | sed 's/^/  /'

stage "step profile of the CUDA executor (cost_model.kind = profiled) -> $LOG_DIR/profile/step_profile_cuda.h5"
# The small model (head dim 128; the CUDA kernels take 64 or 128, the tiny CPU model has 32).
timeout 120 build-gpu/testbed profile experiments/quickstart.ini --executor.kind=cuda --repeats 2 \
  --model.config=experiments/models/small.json --cache.num_blocks=8192 \
  --output "$LOG_DIR/profile/step_profile_cuda.h5" > "$LOG_DIR/step_profile.log" 2>&1 || { tail -5 "$LOG_DIR/step_profile.log"; status=1; }
tail -2 "$LOG_DIR/step_profile.log"

stage "summary"
awk -F, '
  FNR == 1 { next }
  FILENAME ~ /prefill/ {
    shape = sprintf("%s d%d B%d L%d H%d:%d", $2, $8, $3, $4, $6, $7)
    goal = ($1 != "naive" && $2 == "bf16" && $8 == 128 && $4 >= 4096)
    note = ($1 == "naive") ? sprintf("S+P in HBM: %.0f MiB", $12 / 1048576) : (goal ? ($11 >= 300 ? "goal 300: MET" : "goal 300: NOT met") : "")
    if (goal) { ng++; if ($11 >= 300) met++ }
    printf "%-15s %-28s %9.1f TFLOP/s %10.1f us   %s\n", $1, shape, $11, $10, note
  }
  FILENAME ~ /decode/ {
    shape = sprintf("%s d%d B%d L%d H%d:%d s%d", $2, $7, $3, $4, $5, $6, $9)
    goal = ($4 >= 8192)
    note = goal ? ($13 >= 80 ? "goal 80%: MET" : "goal 80%: NOT met") : ""
    if (goal) { ng++; if ($13 >= 80) met++ }
    printf "%-15s %-28s %9.0f GB/s    %5.1f%% of copy   %s\n", $1, shape, $12, $13, note
  }
  END { printf "\ngoals met: %d of %d rows\n", met, ng }
' "$LOG_DIR/profile/prefill_profile.csv" "$LOG_DIR/profile/decode_profile.csv" 2>/dev/null | tee "$LOG_DIR/summary.txt"
echo "logs: $LOG_DIR"
exit $status
