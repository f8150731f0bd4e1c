#!/usr/bin/env bash
# ctest sweep_slurm: the slurm backend on a real (single-node) Slurm cluster.
# Runs one small sweep with the local backend and with the slurm backend (a
# real sbatch job array, waited for), and checks the merged tables are equal;
# then deletes one point's results and re-submits: only that point reruns and
# the table is unchanged; and again with 4 points per array task.
#
#   tests/slurm/test_sweep_slurm.sh BUILD_DIR
#
# The cluster comes from SLURM_CONF (./setup.sh test starts one with
# tests/slurm/cluster.sh). Without a reachable cluster it exits 77 (ctest:
# Skipped) with the reason, unless TESTBED_REQUIRE_SLURM=1 (CI), where that is
# a failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
testbed=$(realpath "$1/testbed")

no_cluster() {
  if [ "${TESTBED_REQUIRE_SLURM:-0}" = 1 ]; then
    echo "FAIL: TESTBED_REQUIRE_SLURM=1 but $1" >&2
    exit 1
  fi
  echo "SKIP: $1 (./setup.sh test starts a single-node cluster; see tests/slurm/cluster.sh)"
  exit 77
}
command -v sbatch >/dev/null || no_cluster "sbatch is not installed"
[ -n "${SLURM_CONF:-}" ] || no_cluster "SLURM_CONF is not set"
sinfo -h -o %T >/dev/null 2>&1 || no_cluster "the cluster of SLURM_CONF=$SLURM_CONF does not answer sinfo"

work=$(mktemp -d /tmp/testbed-sweep-slurm.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat >"$work/micro.json" <<'JSON'
{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 512}
JSON
cat >"$work/base.ini" <<'INI'
[model]
config = micro.json
[executor]
kind = sim
[cost_model]
kind = linear
[cache]
num_blocks = 256
block_size = 8
[workload]
num_requests = 40
system_prompt_tokens = 40
user_tokens = 10
output_tokens = 6
INI
cat >"$work/sweep.ini" <<'INI'
[sweep]
base = base.ini
scheduler.policy = fcfs, sjf
workload.rate = 10, 20, 40
[slurm]
time = 00:05:00
mem = 200M
max_parallel = 4
INI

cd "$work"
"$testbed" sweep sweep.ini --output local --jobs 2 >local.log
start=$(date +%s.%N)
if ! "$testbed" sweep sweep.ini --output slurm --backend slurm >slurm.log 2>&1; then
  cat slurm.log >&2
  echo "FAIL: the slurm backend's sweep failed" >&2
  exit 1
fi
end=$(date +%s.%N)
grep -q "0 failed" slurm.log || { cat slurm.log >&2; echo "FAIL: points failed on Slurm" >&2; exit 1; }
ls slurm/slurm/array-0.sbatch >/dev/null || { echo "FAIL: no sbatch script written" >&2; exit 1; }
grep -q -- "--array=0-5%4" slurm/slurm/array-0.sbatch || { echo "FAIL: array line" >&2; exit 1; }
cmp local/sweep.csv slurm/sweep.csv || { echo "FAIL: local and slurm merged tables differ" >&2; exit 1; }

# Resume: one point's results gone; only it runs again, as a one-task array.
victim=$(sed -n 2p slurm/sweep.csv | cut -d, -f1)
rm "slurm/points/$victim/results.h5"
"$testbed" sweep sweep.ini --output slurm --backend slurm >resume.log 2>&1 || { cat resume.log >&2; exit 1; }
grep -q "5 done earlier, 1 ran" resume.log || { cat resume.log >&2; echo "FAIL: resume" >&2; exit 1; }
grep -q -- "--array=0-0%4" slurm/slurm/array-1.sbatch || { echo "FAIL: resume array" >&2; exit 1; }
cmp local/sweep.csv slurm/sweep.csv || { echo "FAIL: resumed table differs" >&2; exit 1; }
# Several points per array task (slurm.points_per_task): the same table from fewer, longer tasks.
sed 's/^max_parallel = 4$/points_per_task = 4/' sweep.ini >batched.ini
"$testbed" sweep batched.ini --output batched --backend slurm >batched.log 2>&1 || { cat batched.log >&2; exit 1; }
grep -q -- "--array=0-1$" batched/slurm/array-0.sbatch || { echo "FAIL: 6 points in tasks of 4 are 2 tasks" >&2; exit 1; }
cmp local/sweep.csv batched/sweep.csv || { echo "FAIL: points_per_task changed the table" >&2; exit 1; }
awk -v s="$start" -v e="$end" 'BEGIN { printf "ok: 6 points on Slurm equal the local backend; submit to merged table %.1f s\n", e - s }'
