#!/usr/bin/env bash
# GPU check: the GPU tests (kernels vs CPU references, CudaExecutor vs
# CpuExecutor), a compute-sanitizer pass over small shapes, the attention,
# speculative-verification and quantized-GEMM (W4A16 vs cuBLAS bf16, FP8 vs
# cuBLASLt) benchmarks and a step profile of the CUDA executor,
# then one table against the project's goals:
#   decode  >= 80% of the measured device-to-device copy bandwidth at long contexts (>= 8k keys)
#   prefill >= 300 TFLOP/s, bf16, head_dim 128, causal, >= 4k tokens
#
# The GPU machine's image has the CUDA toolkit but none of Eigen, Boost, HDF5,
# Catch2, Google Benchmark or nlohmann-json, and nothing can be installed
# there. So the binaries are built on a machine that has them and carried:
#
#   experiments/gpu_check.sh package   on the build machine: builds build-gpu/
#                                      (sm_90) and fills build-gpu/bundle/ with
#                                      the binaries (with libtestbed_cuda.so,
#                                      the CUDA module testbed loads from
#                                      beside itself for executor.kind = cuda)
#                                      and every shared library they need but
#                                      the C library and CUDA's own (the image
#                                      has CUDA 13.0); carry build-gpu/bundle
#                                      (prints its size)
#   experiments/gpu_check.sh           on the GPU machine, from the repository
#                                      root: uses build-gpu/bundle when it is
#                                      there (SKIP_BUILD=1 insists on it), else
#                                      builds build-gpu/ first (needs the
#                                      development packages)
#
# Before running anything it lists, with ldd, every library a binary cannot
# resolve there. Logs, the kernel profile CSVs and the CUDA executor's step
# profile (the HDF5 table cost_model.kind = profiled reads) go to
# ${OUT:-/tmp}/gpu_check/. Designed to finish in under 8 minutes on one H200;
# every stage has its own time limit.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-run}"
BUILD_DIR="${BUILD_DIR:-build-gpu}"  # package from an existing CUDA Release build with BUILD_DIR=build
BUNDLE=build-gpu/bundle
LOG_DIR="${OUT:-/tmp}/gpu_check"
JOBS="$(nproc 2>/dev/null || echo 8)"
stage() { echo "== $1 ($(date +%H:%M:%S))"; }

build() {
  stage "configure + build (sm_90) in $BUILD_DIR -> $1"
  timeout 1800 bash -c "cmake -S . -B $BUILD_DIR -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DTESTBED_CUDA=ON -DTESTBED_BENCHMARKS=ON &&
    cmake --build $BUILD_DIR -j$JOBS --target gpu_test_kernels bench_attention bench_verify bench_gemm testbed \
      testbed_cuda_module" > "$1" 2>&1 || {
    tail -30 "$1"
    echo "BUILD FAILED (see $1)"
    return 1
  }
}

# testbed links no CUDA: executor.kind = cuda loads libtestbed_cuda.so from beside
# it (engine/cuda_module.h), so the module travels in bin/ with it.
binaries() {
  echo $BUILD_DIR/tests/gpu_test_kernels $BUILD_DIR/kernels/bench_attention $BUILD_DIR/kernels/bench_verify \
    $BUILD_DIR/kernels/bench_gemm $BUILD_DIR/testbed $BUILD_DIR/libtestbed_cuda.so
}

if [ "$MODE" = package ]; then
  mkdir -p build-gpu "$BUILD_DIR"
  build "$BUILD_DIR/build.log" || exit 1
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
  for b in $(binaries); do cp "$b" "$BUNDLE/bin/"; done
  # Every resolved library but the C library's own and CUDA's (the device has those, matching the driver).
  for b in $(binaries); do ldd "$b"; done | awk '$3 ~ /^\// { print $3 }' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libutil|ld-linux-x86-64)\.so|libcuda|libcudart|libcublas|libnvidia' |
    while read -r lib; do cp -L "$lib" "$BUNDLE/lib/"; done
  strip --strip-unneeded "$BUNDLE"/bin/* 2>/dev/null || true
  git rev-parse --short HEAD > "$BUNDLE/commit" 2>/dev/null || true
  echo "bundle: $BUNDLE ($(du -sh "$BUNDLE" | cut -f1), $(ls "$BUNDLE/lib" | wc -l) libraries, commit $(cat "$BUNDLE/commit" 2>/dev/null))"
  echo "carry it, e.g. run(command='experiments/gpu_check.sh', carry=['$BUNDLE'])"
  exit 0
fi

mkdir -p "$LOG_DIR/profile"
status=0
if [ -d "$BUNDLE/bin" ]; then
  BIN="$BUNDLE/bin"
  export LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "using the carried bundle (commit $(cat "$BUNDLE/commit" 2>/dev/null || echo '?'))"
elif [ "${SKIP_BUILD:-0}" = 1 ]; then
  echo "SKIP_BUILD=1 but $BUNDLE is not here: run 'experiments/gpu_check.sh package' where the build works, and carry it"
  exit 1
else
  build "$LOG_DIR/build.log" || exit 1
  BIN=""
fi
# CUDA's own libraries: the toolkit's, wherever the image keeps them.
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
bin() {  # bin NAME: the carried binary or the one just built
  if [ -n "$BIN" ]; then echo "$BIN/$1"; else
    case "$1" in
      gpu_test_kernels) echo $BUILD_DIR/tests/$1 ;;
      testbed | libtestbed_cuda.so) echo $BUILD_DIR/$1 ;;
      *) echo $BUILD_DIR/kernels/$1 ;;
    esac
  fi
}

# Still unresolved CUDA libraries (an image keeping them elsewhere, e.g. in Python's nvidia packages): look for them.
for want in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
  if ldd "$(bin gpu_test_kernels)" 2>/dev/null | grep -q "$want => not found"; then
    found=$(timeout 60 find /usr /opt -name "$want*" -type f 2>/dev/null | head -1)
    [ -n "$found" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$found")" && echo "found $want in $(dirname "$found")"
  fi
done

stage "device and libraries"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$LOG_DIR/device.txt" 2>&1 ||
  echo "nvidia-smi: not available" > "$LOG_DIR/device.txt"
cat "$LOG_DIR/device.txt"
missing=0
for b in gpu_test_kernels bench_attention bench_verify bench_gemm testbed libtestbed_cuda.so; do
  unresolved=$(ldd "$(bin $b)" 2>&1 | grep -E "not found|version .* not found" || true)
  if [ -n "$unresolved" ]; then
    echo "$b cannot resolve:"
    echo "$unresolved" | sed 's/^/  /'
    missing=1
  fi
done
[ $missing = 1 ] && { echo "LIBRARIES MISSING: rebuild here without the bundle (rm -rf $BUNDLE), or carry what is listed"; exit 1; }
echo "every library resolves"

stage "GPU tests -> $LOG_DIR/gpu_tests.log"
timeout 200 "$(bin gpu_test_kernels)" --durations yes > "$LOG_DIR/gpu_tests.log" 2>&1
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

stage "compute-sanitizer on small shapes -> $LOG_DIR/sanitizer.log"
if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 "$(bin gpu_test_kernels)" "[ops]" \
      >> "$LOG_DIR/sanitizer.log" 2>&1
    rc=$?
    case $rc in
      0) echo "  $tool [ops]: clean" ;;
      9) echo "  $tool [ops]: ERRORS"; grep -m 10 -E "^=+ (Invalid|Race|Error)" "$LOG_DIR/sanitizer.log"; status=1 ;;
      124) echo "  $tool [ops]: timed out" ;;
      *) echo "  $tool [ops]: did not run (rc $rc): $(grep -m 1 -i -E "error|not supported" "$LOG_DIR/sanitizer.log")" ;;
    esac
  done
else
  echo "  compute-sanitizer is not on PATH"
fi

stage "benchmarks -> $LOG_DIR/bench_attention.log"
timeout 180 "$(bin bench_attention)" --benchmark_min_time=0.05 --profile_dir="$LOG_DIR/profile" \
  --benchmark_out="$LOG_DIR/bench_attention.json" --benchmark_out_format=json > "$LOG_DIR/bench_attention.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  tail -20 "$LOG_DIR/bench_attention.log"
  echo "BENCHMARKS FAILED (rc $rc)"
  status=1
fi
grep -m 1 "copy bandwidth" "$LOG_DIR/bench_attention.log"

stage "verify kernel benchmark -> $LOG_DIR/bench_verify.log"
timeout 90 "$(bin bench_verify)" --benchmark_min_time=0.05 > "$LOG_DIR/bench_verify.log" 2>&1 ||
  { tail -10 "$LOG_DIR/bench_verify.log"; status=1; }
grep -E "^BM_Verify" "$LOG_DIR/bench_verify.log" | sed 's/^/  /'

stage "quantized GEMM benchmark -> $LOG_DIR/bench_gemm.log"
timeout 120 "$(bin bench_gemm)" --benchmark_min_time=0.05 --profile_dir="$LOG_DIR/profile" > "$LOG_DIR/bench_gemm.log" 2>&1 ||
  { tail -10 "$LOG_DIR/bench_gemm.log"; status=1; }
awk -F, 'NR > 1 { printf "  %-13s M%-5d N%-5d K%-5d %9.1f us %8.1f TFLOP/s %7.0f GB/s %s\n", $1, $2, $3, $4, $5, $6, $7,
  ($8 > 0 ? sprintf("%.2fx the baseline", $8) : "") }' "$LOG_DIR/profile/gemm_profile.csv" 2>/dev/null
grep -m 5 "ERROR\|error_message" "$LOG_DIR/bench_gemm.log" | sed 's/^/  /'

stage "step profile of the CUDA executor (cost_model.kind = profiled) -> $LOG_DIR/profile/step_profile_cuda.h5"
# The small model (head dim 128; the CUDA kernels take 64 or 128, the tiny CPU model has 32).
timeout 120 "$(bin testbed)" profile experiments/quickstart.ini --executor.kind=cuda --repeats 2 \
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
