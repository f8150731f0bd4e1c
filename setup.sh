#!/usr/bin/env bash
# The one set-up step for a fresh Debian machine, used by the README's two
# commands and by CI. Installs what is missing (Debian packages only), builds,
# then tests or runs the default experiment with its plots.
#
#   ./setup.sh test            install, build, start a single-node Slurm cluster
#                              (tests/slurm/cluster.sh; root only), run every test (ctest)
#   ./setup.sh run [CONFIG]    install, build, run CONFIG (default: experiments/quickstart.ini), plot it
#   ./setup.sh build           install and build only
#   ./setup.sh deps            install the Debian packages only
#   ./setup.sh sanitize        build the tests under ASan + UBSan (build-sanitize) and run them
#   ./setup.sh tsan            build the simulator under ThreadSanitizer (build-tsan) and run the
#                              fleet's multi-threaded tests and runs (fleet.threads); any race fails
#   ./setup.sh fuzz [SECONDS]  build the libFuzzer harnesses with clang (build-fuzz) and run each
#                              for SECONDS (default 45); any crash, leak, timeout or sanitizer
#                              report fails, and the input is left in build-fuzz/findings/
#
# Environment: BUILD_DIR (default build), JOBS (default: number of cores),
# CMAKE_ARGS (extra configure flags, e.g. -DTESTBED_CUDA=OFF), TESTBED_REQUIRE_SLURM=1
# (CI: the Slurm backend's test fails, never skips, when the cluster is missing).
set -euo pipefail
cd "$(dirname "$0")"

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
PACKAGES="cmake make g++ libeigen3-dev libboost-program-options-dev libhdf5-dev catch2 libbenchmark-dev
          nlohmann-json3-dev python3-matplotlib python3-h5py libhnswlib-dev"
# For the tests only: a real Slurm for the sweep's slurm backend (tests/slurm/).
TEST_PACKAGES="slurmctld slurmd slurm-client munge"

install_deps() {
  local missing=()
  for p in $PACKAGES ${EXTRA_PACKAGES:-}; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  install_deps
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

# A single-node Slurm cluster for the tests, stopped when this script exits.
# Needs root (slurmd launches the jobs); without it the slurm test skips, or
# fails under TESTBED_REQUIRE_SLURM=1.
start_slurm() {
  if ! tests/slurm/cluster.sh check; then
    echo "setup: no Slurm cluster for the tests (ctest sweep_slurm skips)" >&2
    return 0
  fi
  SLURM_DIR=$(mktemp -d /tmp/testbed-slurm.XXXXXX)
  rmdir "$SLURM_DIR"
  trap 'tests/slurm/cluster.sh stop "$SLURM_DIR" || true; rm -rf "$SLURM_DIR"' EXIT
  if tests/slurm/cluster.sh start "$SLURM_DIR"; then
    eval "$(tests/slurm/cluster.sh env "$SLURM_DIR")"
  else
    echo "setup: the Slurm cluster did not start (ctest sweep_slurm skips, or fails under TESTBED_REQUIRE_SLURM=1)" >&2
  fi
}

# Debug with -O1: the sanitizers' reports keep their lines, the tests stay quick enough.
SANITIZED_ARGS=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g" -DTESTBED_CUDA=OFF -DTESTBED_BENCHMARKS=OFF)

sanitize() {
  install_deps
  local dir=${BUILD_DIR_SANITIZE:-build-sanitize}
  cmake -S . -B "$dir" "${SANITIZED_ARGS[@]}" -DTESTBED_SANITIZE=ON >/dev/null
  cmake --build "$dir" -j "$JOBS"
  # Leaks fail too; the Slurm test needs a cluster (the main test job runs it).
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j "$JOBS" -LE slurm)
}

# The fleet's worker threads (sim/fleet_windows.cpp) under ThreadSanitizer: the
# unit tests that step fleets on several threads, and CLI runs that exercise
# faults, late index events, cancellations and the event log on 2 and 4 threads.
tsan() {
  install_deps
  local dir=${BUILD_DIR_TSAN:-build-tsan}
  cmake -S . -B "$dir" "${SANITIZED_ARGS[@]}" -DTESTBED_TSAN=ON >/dev/null
  cmake --build "$dir" -j "$JOBS" --target testbed test_sim
  export TSAN_OPTIONS="halt_on_error=1 exitcode=66"
  "$dir/tests/test_sim" "[threads]"
  local out="$dir/tsan-runs" threads
  for threads in 2 4; do
    "$dir/testbed" run experiments/prefix_routing.ini --workload.num_requests=300 --fleet.num_instances=8 \
      --router.type=prefix_precise --fault.fail=1@10 --fault.slow=0@2-8x2 --fault.kv_event_delay_s=0.002 \
      --workload.cancel_fraction=0.3 --output.events=true --fleet.threads=$threads --output "$out/faults-$threads" --overwrite
    "$dir/testbed" run experiments/fleet_1k.ini --workload.num_requests=1500 --cache.num_blocks=2000 \
      --fleet.num_instances=128 --workload.profile_trace=traces/samples/azure2023_conv_head300.csv \
      --fleet.threads=$threads --output "$out/mix-$threads" --overwrite
  done
  echo "setup: tsan: no race found"
}

fuzz() {
  local seconds=${1:-45}
  EXTRA_PACKAGES="clang libclang-rt-dev" install_deps
  local dir=${BUILD_DIR_FUZZ:-build-fuzz}
  CC=clang CXX=clang++ cmake -S . -B "$dir" "${SANITIZED_ARGS[@]}" -DTESTBED_FUZZ=ON >/dev/null
  local targets
  targets=$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//' | grep -v '^fuzz_support$')
  # shellcheck disable=SC2086
  cmake --build "$dir" -j "$JOBS" --target $targets
  mkdir -p "$dir/findings"
  local failed=0
  for t in $targets; do
    local name=${t#fuzz_} work="$dir/corpus/${t#fuzz_}"
    mkdir -p "$work"
    # A fresh working corpus seeded from the shipped one; found inputs land in findings/.
    if ! "$dir/tests/fuzz/$t" "$work" "tests/fuzz/corpus/$name" -max_total_time="$seconds" -timeout=10 \
         -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/findings/$name-" \
         > "$dir/findings/$name.log" 2>&1; then
      echo "setup: fuzz $name FAILED (log: $dir/findings/$name.log; the input: $dir/findings/$name-*)" >&2
      tail -40 "$dir/findings/$name.log" >&2
      failed=1
    else
      echo "setup: fuzz $name: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/findings/$name.log" | grep -o '[0-9]*$') runs in ${seconds} s, nothing found"
    fi
  done
  return $failed
}

case "${1:-}" in
  deps) EXTRA_PACKAGES=$TEST_PACKAGES install_deps ;;
  build) build ;;
  test)
    EXTRA_PACKAGES=$TEST_PACKAGES build
    start_slurm
    (cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS")
    ;;
  sanitize) sanitize ;;
  tsan) tsan ;;
  fuzz) fuzz "${2:-45}" ;;
  run)
    config=${2:-experiments/quickstart.ini}
    out="results/$(basename "$config" .ini)"
    build
    "$BUILD_DIR/testbed" run "$config" --output "$out" --overwrite  # this script owns results/<name>
    /usr/bin/python3 analysis/plot_run.py "$out/results.h5" --out "$out"
    ;;
  *)
    sed -n '2,20p' "$0"
    exit 2
    ;;
esac
