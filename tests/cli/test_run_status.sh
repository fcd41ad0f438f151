#!/bin/bash
# Integration: a command that dies by a signal is reported with that signal (run.status written by
# `plateau run`, read by `plateau report`), and a process that recorded nothing is "no data", never "no leak".
# Usage: test_run_status.sh PLATEAU
set -u
P=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$P" run --no-report -o "$tmp/segv" -- sh -c 'kill -SEGV $$' >/dev/null 2>&1
[ $? -eq 139 ] || fail "exit status is not 128+11"
grep -qE "^pid [0-9]+ signal 11( oom_kill [0-9]+)?( host_oom_kill [0-9]+)?$" "$tmp/segv/run.status" || fail "run.status: $(cat "$tmp/segv/run.status")"
"$P" report "$tmp/segv" --json "$tmp/segv.json" >"$tmp/segv.txt" 2>&1 || fail "report"
cat "$tmp/segv.txt"
head -1 "$tmp/segv.txt" | grep -q "^verdict: no data" || fail "first line is not 'verdict: no data'"
grep -q "SIGSEGV" "$tmp/segv.txt" || fail "the signal is not named"
grep -q "SIGKILL\|OOM" "$tmp/segv.txt" && fail "a SIGSEGV called SIGKILL/OOM"
grep -q "No leak\|no leak" "$tmp/segv.txt" && fail "no data called no leak"
grep -q "step -1" "$tmp/segv.txt" && fail "'up to step -1'"
python3 - "$tmp/segv.json" <<'PY' || fail "JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verdict"]["kind"] == "no-data", d["verdict"]
assert "SIGSEGV" in d["cut_reason"], d["cut_reason"]
assert all(p["verdict"]["kind"] == "no-data" for p in d["processes"]), [p["verdict"] for p in d["processes"]]
PY

# a clean exit with a status: no cut-short, the status file says so
"$P" run --no-report -o "$tmp/exit3" -- sh -c 'exit 3' >/dev/null 2>&1
[ $? -eq 3 ] || fail "exit status 3 not returned"
grep -qE "^pid [0-9]+ exit 3( oom_kill [0-9]+)?( host_oom_kill [0-9]+)?$" "$tmp/exit3/run.status" || fail "run.status: $(cat "$tmp/exit3/run.status")"
"$P" report "$tmp/exit3" | grep -q "cut short" && fail "a clean exit reported as cut short"
echo "ok: signal named from run.status; nothing recorded is no data"
