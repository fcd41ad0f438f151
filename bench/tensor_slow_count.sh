#!/usr/bin/env bash
# One slow live tensor count and the schedule after it (docs/python.md, "When a count runs"): bench/transient_heap.py
# (600 fast steps, a 4M-object heap alive at the boundary after step 8) under plateau run at the default
# PLATEAU_TENSOR_BUDGET, ROUNDS times; per run: the steps the report's `tensors` series has points at, the last one,
# the `tensors` verdict, and the bootstrap's own figures at exit (counts, their seconds, the run's wall time).
# OLD_PYTHON_DIR=DIR runs each round a second time with that bootstrap (PLATEAU_PYTHON_DIR: another tree's
# build/python) for a before/after comparison on the same machine.
#   bench/tensor_slow_count.sh [ROUNDS=3] [ARGS for transient_heap.py...]
# Env: BUILD (default build), PY (default /usr/bin/python3: Debian's, with torch).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
BUILD=${BUILD:-build}
PY=${PY:-/usr/bin/python3}
plateau="$PWD/$BUILD/cli/plateau"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() { # label round -> one line
    local label=$1 r=$2 d="$tmp/$1.$2"
    "$plateau" run --no-report -o "$d" -- "$PY" bench/counts_at_exit.py bench/transient_heap.py "${args[@]}" > "$d.log" 2>&1 ||
        { echo "bench: $label run failed" >&2; tail -5 "$d.log" >&2; exit 1; }
    "$plateau" report "$d" --json "$d.json" > /dev/null
    "$PY" - "$label" "$r" "$d.json" "$d.log" <<'PYEOF'
import json, sys
label, r, j, log = sys.argv[1:5]
c = [l.split() for l in open(log, errors="replace") if l.startswith("COUNTS")]
n, secs, _, wall = c[-1][1:5] if c else ("?", "?", "?", "?")
for p in json.load(open(j))["processes"]:
    m = {x["name"]: x for x in p["metrics"]}
    if "tensors" not in m:
        continue
    t = m["tensors"]
    st = [s[0] for s in t["series"]]
    why = (t.get("inconclusive") or {}).get("reason") or ""
    print("| %s | %s | %d | %d | %s %s | %s s of %s s | %s |" % (label, r, len(st), st[-1], t["verdict"], why, secs, wall,
                                                              ", ".join(map(str, st))))
PYEOF
}
args=("$@")
echo "| bootstrap | round | counts | last | tensors | count time of wall | steps counted |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
    ( unset PLATEAU_PYTHON_DIR; one this "$r" )
    if [ -n "${OLD_PYTHON_DIR:-}" ]; then ( export PLATEAU_PYTHON_DIR=$OLD_PYTHON_DIR; one old "$r" ); fi
done
