#!/usr/bin/env bash
# Prefix-cache-aware routing vs cache-blind balancers: every run of
# papers/prefix-routing/README.md. Each section is a sweep file in this folder
# (papers/prefix-routing/<section>.ini: a base config in experiments/ and the
# values it sweeps), run by `testbed sweep` into results/prefix-routing/<section>/
# (one `testbed run` per point in points/<id>/, merged into sweep.h5 and sweep.csv).
#
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2
#   papers/prefix-routing/run.sh            # everything: 180 points (~3 min on one core)
#   papers/prefix-routing/run.sh shared mooncake_capacity   # some sections
#   /usr/bin/python3 papers/prefix-routing/plot.py
#
# Sections: shared shared_load shared_prefixes staleness mooncake
#           mooncake_capacity llmd.
# Environment:
#   TESTBED=path   the testbed binary (default ./build/testbed)
#   JOBS=N         points at once (testbed sweep --jobs; default: every core)
#   FORCE=1        delete a section's results/prefix-routing/<section>/ first and rerun it
# A sweep skips the points whose results are complete, so an interrupted run resumes.
set -euo pipefail
cd "$(dirname "$0")/../.."

TESTBED=${TESTBED:-./build/testbed}  # another build: TESTBED=/path/to/testbed run.sh
OUT=results/prefix-routing
HERE=papers/prefix-routing
ALL="shared shared_load shared_prefixes staleness mooncake mooncake_capacity llmd"
sections=${*:-$ALL}
for s in $sections; do
  [ -f "$HERE/$s.ini" ] || { echo "run.sh: unknown section '$s' (sections: $ALL)" >&2; exit 2; }
done
[ -x "$TESTBED" ] || { echo "run.sh: $TESTBED not found; build first (see README.md)" >&2; exit 1; }
mkdir -p "$OUT"

# The full Mooncake conversation trace if this checkout has it, else the sample.
MOONCAKE=../shared/traces/mooncake_conversation.jsonl
if [ ! -f "$MOONCAKE" ]; then
  MOONCAKE=traces/samples/mooncake_conversation_head300.jsonl
  echo "run.sh: ../shared/traces/mooncake_conversation.jsonl is absent: using the 300-line sample" >&2
fi
echo "$MOONCAKE" > "$OUT/mooncake_trace_used.txt"
echo "run.sh: Mooncake trace = $MOONCAKE"

jobs=()
[ -n "${JOBS:-}" ] && jobs=(--jobs "$JOBS")

status=0  # a section with failed points (listed by testbed sweep) does not stop the others
for s in $sections; do
  overrides=()
  case $s in
    mooncake | mooncake_capacity) overrides=(--trace.path="$MOONCAKE") ;;
  esac
  [ "${FORCE:-0}" = 1 ] && rm -rf "${OUT:?}/$s"
  echo "== $s: $TESTBED sweep $HERE/$s.ini --output $OUT/$s ${jobs[*]} ${overrides[*]}"
  "$TESTBED" sweep "$HERE/$s.ini" --output "$OUT/$s" "${jobs[@]}" "${overrides[@]}" || status=$?
done
exit $status
