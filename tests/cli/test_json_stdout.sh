#!/bin/sh
# --json - means stdout for every command: report, report RUN_A RUN_B, tune and replay write the JSON
# document alone on stdout (it parses whole) instead of the text, and no file named '-' appears. report --html -
# writes the HTML to stdout; --json - with --html - is refused.
# usage: test_json_stdout.sh PLATEAU REPORT_GEN TUNE_GEN WORKDIR
set -eu
P=$(realpath "$1") rgen=$(realpath "$2") tgen=$(realpath "$3") work=$4/json-stdout-$$
rm -rf "$work"; mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.out "$work"/*.err; do echo "== $f"; head -c 2000 "$f"; done >&2; exit 1; }
# parses FILE: the whole of it is one JSON document
parses() { python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }

"$rgen" "$work/leak.pltrace" 4096 30 >/dev/null || fail "report_gen"
"$tgen" frag "" "$work/frag.pltrace" || fail "tune_gen"
cd "$work"

"$P" report leak.pltrace --json - >report.out 2>report.err || fail "report --json - exits $?"
parses report.out || fail "report --json -: stdout is not one JSON document"
"$P" report leak.pltrace --html - >html.out 2>html.err || fail "report --html - exits $?"
head -c 200 html.out | grep -qi '<!doctype html' || fail "report --html -: stdout is not the HTML"
rc=0; "$P" report leak.pltrace --json - --html - >both.out 2>both.err || rc=$?
[ "$rc" = 2 ] || fail "report --json - --html - exits $rc, not 2"
"$P" report leak.pltrace leak.pltrace --allocators glibc,jemalloc --json - >compare.out 2>compare.err ||
    fail "report RUN_A RUN_B --json - exits $?"
parses compare.out || fail "report RUN_A RUN_B --json -: stdout is not one JSON document"
"$P" tune frag.pltrace --grid 'expandable_segments=False|True' --json - >tune.out 2>tune.err || fail "tune --json - exits $?"
parses tune.out || fail "tune --json -: stdout is not one JSON document"
"$P" replay frag.pltrace --conf expandable_segments:True --json - >replay.out 2>replay.err || fail "replay --json - exits $?"
parses replay.out || fail "replay --json -: stdout is not one JSON document"
[ ! -e ./- ] || fail "a file named '-' was written"
# a real file name still gets the file, and the text on stdout
"$P" tune frag.pltrace --grid 'expandable_segments=False|True' --json t.json >tfile.out 2>&1 || fail "tune --json t.json"
parses t.json && grep -q 'json: t.json' tfile.out || fail "tune --json FILE"
echo "ok: --json - is stdout"
