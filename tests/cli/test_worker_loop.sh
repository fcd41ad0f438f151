#!/bin/bash
# Unit (a recorded run, no preload): a quiet worker whose loop period detection found is folded with what it is, a
# worker that steps, never as one that "never steps". tests/fixtures/runs/worker_loop_quiet.tar.xz is
# tests/targets/workerloop.c recorded once under `plateau run` (PLATEAU_TRACE_FULL=1): a trainer that marks its steps
# and a forked worker whose unmarked loop (80 batches of four large buffers, nothing kept) period detection finds.
# The text's workers line, its process table's folded row (with the worker's 80 steps) and the HTML's collapsed
# group say the same line; the JSON counts the quiet worker rows (the worker and its pool).
# usage: test_worker_loop.sh PLATEAU FIXTURES_DIR
set -u
P=$1 fx=$2
tmp=$(mktemp -d /tmp/pl-test-worker-loop-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
d=$tmp/run
mkdir "$d"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$fx/runs/worker_loop_quiet.tar.xz" "$d" || fail "cannot unpack worker_loop_quiet"
"$P" report "$d" --json "$tmp/r.json" --html "$tmp/r.html" >"$tmp/r.txt" 2>"$tmp/r.err" ||
    { cat "$tmp/r.err"; fail "report exited $?"; }
cat "$tmp/r.txt"
w=$(sed -n 's/^pid \([0-9]*\): steps auto-detected, period .*/\1/p' "$tmp/r.txt")
[ -n "$w" ] || fail "the worker's loop was not found (the fixture's point)"
! grep -n 'never step' "$tmp/r.txt" || fail "a worker whose loop was found is said to never step"
line="workers (1 process whose loop period detection found, pid $w): none leaks;"
grep -qF "$line" "$tmp/r.txt" || fail "the text's workers line is not '$line...'"
grep -Eq '^ +\.\.\. +80 +- +no-leak +1 worker process whose loop period detection found, none leaks$' "$tmp/r.txt" ||
    fail "the process table's folded row does not say the worker's 80 steps and its loop"
grep -qF "<details class=\"workers\"><summary>$line" "$tmp/r.html" || fail "the HTML's workers group is not '$line...'"
! grep -n 'never step' "$tmp/r.html" || fail "the HTML says a worker whose loop was found never steps"
python3 - "$tmp/r.json" "$w" <<'PY' || fail "JSON"
import json, sys
d = json.load(open(sys.argv[1]))
w = [p for p in d["processes"] if p["pid"] == int(sys.argv[2])]
assert len(w) == 1 and w[0]["role"] == "worker", w
assert d["verdict"]["workers_quiet"] == 2 and d["verdict"]["kind"] == "no-leak", d["verdict"]
PY
echo "ok: the worker whose loop was found is folded as one that steps"
