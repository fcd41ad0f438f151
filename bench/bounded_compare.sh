#!/bin/bash
# bounded_compare: the report of a real run's full traces against the report of the same traces compacted as plateau
# run's collector compacts them (docs/long-runs.md): text and JSON must be the same but for what a bounded trace says
# of itself (its "bounded trace:" line, the JSON "aggregated" objects and record counts).
#   bench/bounded_compare.sh [BUILD=build] [-- COMMAND...]   default command: bench/torch_realistic.py --steps 300 --leak
# Prints the bytes before and after per trace, SAME or the differences, and the verdict line. Exit 0 when the same.
set -euo pipefail
build=${1:-build}; shift || true
[ "${1:-}" = "--" ] && shift
cmd=("$@"); [ ${#cmd[@]} -gt 0 ] || cmd=(/usr/bin/python3 "$PWD/bench/torch_realistic.py" --steps 300 --leak)
plateau="$build/cli/plateau"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plateau-bounded-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
PLATEAU_TRACE_FULL=1 "$plateau" run --no-report -o "$tmp/full" -- "${cmd[@]}" >/dev/null 2>&1 || true
"$build/bench/longrun_gen" compact "$tmp/full" "$tmp/bounded"
# the run's own files (run.status: how the command ended, the run id) as plateau run left them: only traces differ
find "$tmp/full" -maxdepth 1 -type f ! -name '*.pltrace' -exec cp -p {} "$tmp/bounded"/ \;
json() { "$plateau" report "$1" --json - | python3 -c '
import json, sys
d = json.load(sys.stdin)
def walk(o):
    if isinstance(o, dict):
        o.pop("aggregated", None); o.pop("records", None)
        for v in o.values(): walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
walk(d); print(json.dumps(d, indent=1, sort_keys=True))' | sed "s|$1|DIR|g"; }
text() { "$plateau" report "$1" | sed "s|$1|DIR|g" | grep -v 'bounded trace:'; }
json "$tmp/full" >"$tmp/a.json"; json "$tmp/bounded" >"$tmp/b.json"
text "$tmp/full" >"$tmp/a.txt"; text "$tmp/bounded" >"$tmp/b.txt"
"$plateau" report "$tmp/bounded" | grep 'bounded trace:' || true
head -1 "$tmp/a.txt"
if diff "$tmp/a.json" "$tmp/b.json" && diff "$tmp/a.txt" "$tmp/b.txt"; then echo SAME; else echo DIFFERENT; exit 1; fi
