#!/bin/bash
# pytest: plateau's plugin and pytest-memray's limit_leaks side by side, on the same four test bodies
# (tests/python/pytest_bodies/bodies.py: a pure-Python leak of 16 KiB per call, a 4 MiB cache filled over 64 calls, a
# torch 1.13 leak of each step's output, an Adam model with a bounded deque of outputs), RUNS times each (default 5).
#   plateau:      @pytest.mark.plateau(steps=200)                     (test_plateau_bodies.py)
#   memray x1:    @pytest.mark.limit_leaks(LIMIT), the body once       (test_memray_bodies.py, BODY_LOOPS=1)
#   memray x200:  the same with the body looped 200 times in the test (BODY_LOOPS=200)
# Prints one line per tool, body and run (outcome, seconds for the whole pytest run), then a summary table.
# Usage: bench/pytest_plugins.sh BUILD_DIR [RUNS] [LIMIT...]   (the venv: make integrations-venv)
set -u
build=$(cd "${1:-build}" && pwd)
runs=${2:-5}
shift 2 2>/dev/null || shift $#
limits=("$@")
[ ${#limits[@]} -gt 0 ] || limits=("1 MB" "10 MB")
src=$(cd "$(dirname "$0")/.." && pwd)
py=$build/integrations-venv/bin/python
[ -x "$py" ] || { echo "no $py: make integrations-venv" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/tests/python/pytest_bodies/." "$tmp/"
cd "$tmp" || exit 1
export PYTHONPATH=$build/python
unset PLATEAU_DIR
mkdir "$tmp/runs"
export TMPDIR=$tmp/runs  # the run directories plateau's plugin keeps (failed tests): removed with $tmp
outcome() { # junit xml -> "test_x passed" lines
  "$py" - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
for c in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    tags = {ch.tag for ch in c}
    print(c.get("name"), "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed")
PY
}
run() { # name, then pytest args
  local name=$1; shift
  for i in $(seq 1 "$runs"); do
    local t0=$(date +%s.%N)
    "$py" -m pytest -q -p no:cacheprovider --junitxml "$tmp/j.xml" "$@" >"$tmp/out.txt" 2>&1
    local t1=$(date +%s.%N)
    outcome "$tmp/j.xml" | while read -r test res; do
      printf '%-22s %-20s run %d  %-7s %6.1f s\n' "$name" "$test" "$i" "$res" "$(echo "$t1 - $t0" | bc)"
    done
  done
}
{
  run plateau -p plateau.pytest_plugin --plateau-exe "$build/cli/plateau" test_plateau_bodies.py
  for lim in "${limits[@]}"; do
    LEAK_LIMIT=$lim BODY_LOOPS=1 run "memray-x1-${lim// /}" --memray test_memray_bodies.py
    LEAK_LIMIT=$lim BODY_LOOPS=200 run "memray-x200-${lim// /}" --memray test_memray_bodies.py
  done
} | tee "$tmp/all.txt"
echo
echo "summary (runs failed / runs; the right answer: leak_* fail, plateau_* pass):"
awk '{k=$1" "$2; n[k]++; if ($5=="failed") f[k]++; t[$1]+=$6; c[$1]++}
     END {for (k in n) printf "  %-40s %d/%d failed\n", k, f[k], n[k] | "sort"; close("sort");
          for (x in t) printf "  %-22s %.1f s per pytest run (4 bodies)\n", x, t[x]/c[x] }' "$tmp/all.txt"
