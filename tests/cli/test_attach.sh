#!/bin/bash
# Integration: plateau attach on jobs it did not start (tests/targets/attach_grow.py, plain Python, started here
# without plateau): a host leak is LEAK on rss.anon (exit 3 under --fail-on-leak), a warmup then flat is "no leak",
# steps come from the job's log (--steps-from), a child process is followed, device memory per process comes from
# the NVML test double and is judged as dev.reserved, --stop-on-leak stops the leaking job; and one clear line each
# for a pid that does not exist, a process of another user (setpriv to nobody, skipped where the sandbox cannot),
# a job that ends, and Ctrl-C (the job runs on).
# usage: test_attach.sh PLATEAU TARGETS_SRC_DIR TRACE_DUMP NVML_DOUBLE WORKDIR
set -u
P=$1 T=$2 DUMP=$3 NVML=$4 work=$5/attach-$$
PY=/usr/bin/python3
rm -rf "$work"; mkdir -p "$work"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    for f in "$work"/*.err "$work"/*.out; do [ -f "$f" ] && { echo "== $f" >&2; tail -n 40 "$f" >&2; }; done
    exit 1
}

# job NAME ARGS...: start the target in the background (its log: $work/NAME.log); $job = its pid
job() {
    local name=$1; shift
    "$PY" "$T/attach_grow.py" --wait-for "$work/$name.go" "$@" >"$work/$name.log" 2>"$work/$name.joberr" &
    job=$!
    pids+=("$job")
}
# attach NAME ARGS... -- runs plateau attach on $job into $work/NAME, starts the job's steps, waits; $rc
attach() {
    local name=$1; shift
    timeout 120 "$P" attach -o "$work/$name" --interval-ms 100 --no-live "$@" "$job" >"$work/$name.out" \
        2>"$work/$name.err" &
    local ap=$!
    for _ in $(seq 1 100); do grep -q 'following pid' "$work/$name.err" 2>/dev/null && break; sleep 0.05; done
    touch "$work/$name.go"
    wait "$ap"; rc=$?
    wait "$job" 2>/dev/null
}

# --- a host leak, steps from the log, a child followed; --fail-on-leak exits 3 ---
job leak --host leak --child --steps 150
attach leak --steps-from "$work/leak.log" --fail-on-leak
[ "$rc" = 3 ] || fail "leak: exit $rc, not 3"
grep -q '^verdict: LEAK in pid '"$job"' .*rss.anon' "$work/leak.out" || fail "leak: no LEAK on rss.anon"
grep -q "^plateau attach: the job has ended (pid $job and every process below it); 2 processes followed$" \
    "$work/leak.err" || fail "leak: the end of the job is not said in one line"
grep -q '^note: attached from outside (plateau attach): no live heap, no allocation sites, no tensors' \
    "$work/leak.out" || fail "leak: the report does not say what attach cannot see"
grep -q '^note: steps: from the job.s log' "$work/leak.out" || fail "leak: the steps' source is not said"
n=$("$DUMP" "$work/leak/$job.0.pltrace" | grep -c ' step step=[0-9]* source=4')
[ "$n" -ge 100 ] || fail "leak: $n step records from the log, expected >= 100 of 150"
"$DUMP" "$work/leak/$job.0.pltrace" | grep -q ' process_end' || fail "leak: no process_end record"
ls "$work/leak"/*.pltrace | grep -vq "/$job.0.pltrace" || fail "leak: the child has no trace"

# --- a warmup, then flat: no leak; steps by a pattern ---
job flat --host plateau --steps 150
attach flat --steps-from "$work/flat.log" --step-pattern '^st[e]p ([0-9]+)$' --fail-on-leak
[ "$rc" = 0 ] || fail "flat: exit $rc"
grep -q '^verdict: no leak' "$work/flat.out" || fail "flat: not 'no leak'"
grep -q '^note: steps: from the job.s log .* by the pattern ^st\[e\]p (\[0-9\]+)\$$' "$work/flat.out" ||
    fail "flat: the pattern is not said"
n=$("$DUMP" "$work/flat/$job.0.pltrace" | grep -c ' step step=[0-9]* source=4')
[ "$n" -ge 100 ] || fail "flat: $n step records by the pattern, expected >= 100 of 150"
"$P" attach --steps-from "$work/flat.log" --step-pattern '(' "$$" >"$work/badre.out" 2>&1; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$work/badre.out")" = 1 ] && grep -q "^plateau attach: --step-pattern '(': " \
    "$work/badre.out" || fail "a bad pattern: exit $rc, $(cat "$work/badre.out")"

# --- no --steps-from: by wall time, said in the report ---
job bytime --host flat --steps 60
attach bytime
[ "$rc" = 0 ] || fail "bytime: exit $rc"
grep -q '^note: steps: none (no --steps-from): judged by wall time' "$work/bytime.out" || fail "bytime: not said"

# --- device memory per process from NVML (the double): a device leak beside flat host memory ---
export PLATEAU_LIBNVML=$NVML PL_NVML_DOUBLE_STATE=$work/nvml.state
printf 'device 0 total %d\n' $((80 << 30)) >"$PL_NVML_DOUBLE_STATE"
job dev --host flat --device leak --nvml-state "$PL_NVML_DOUBLE_STATE" --steps 150
attach dev --steps-from "$work/dev.log" --fail-on-leak
[ "$rc" = 3 ] || fail "dev: exit $rc, not 3"
grep -q '^verdict: LEAK in pid '"$job"' .*dev.reserved' "$work/dev.out" || fail "dev: no LEAK on dev.reserved"
grep -q '^note: device memory: used memory per process from NVML (1 device)' "$work/dev.out" ||
    fail "dev: NVML not said"
"$DUMP" "$work/dev/$job.0.pltrace" | grep -q ' alloc_stats allocator=65539 ' || fail "dev: no NVML alloc_stats"
"$P" watch --once "$work/dev" >"$work/devwatch.out" 2>&1 || fail "dev: plateau watch"
grep -q 'dev: LEAK' "$work/devwatch.out" || fail "dev: plateau watch does not show the device leak"
job devflat --host flat --device plateau --nvml-state "$PL_NVML_DOUBLE_STATE" --steps 150
attach devflat --steps-from "$work/devflat.log" --fail-on-leak
[ "$rc" = 0 ] || fail "devflat: exit $rc"
grep -q '^verdict: no leak' "$work/devflat.out" || fail "devflat: not 'no leak'"
"$P" report "$work/devflat" --json "$work/devflat.json" >/dev/null || fail "devflat: report --json"
"$PY" - "$work/devflat.json" <<'EOF' || fail "devflat: dev.reserved not judged a plateau"
import json, sys
rep = json.load(open(sys.argv[1]))
ms = {m["name"]: m["verdict"] for m in rep["processes"][0]["metrics"]}
assert ms.get("dev.reserved") == "plateau", ms
EOF
unset PLATEAU_LIBNVML PL_NVML_DOUBLE_STATE

# --- --stop-on-leak: the leaking job is stopped, exit 3 ---
job stop --host leak --steps 3000
attach stop --steps-from "$work/stop.log" --stop-on-leak --warmup-steps 30 --live-interval 0.2
[ "$rc" = 3 ] || fail "stop: exit $rc, not 3"
grep -q 'stopping pid '"$job" "$work/stop.err" || fail "stop: the leaking process was not stopped"
[ -f "$work/stop/run.stopped" ] || fail "stop: no run.stopped"
last=$(grep -c '^step ' "$work/stop.log")
[ "$last" -lt 3000 ] || fail "stop: the job ran to its end"

# --- one clear line each: no such pid, another user's process, Ctrl-C ---
"$P" attach -o "$work/none" 2147483647 >"$work/none.out" 2>"$work/none.err"; rc=$?
[ "$rc" = 2 ] || fail "no such pid: exit $rc"
[ "$(cat "$work/none.err")" = "plateau attach: no process 2147483647 (it does not exist, or has ended)" ] ||
    fail "no such pid: $(cat "$work/none.err")"
[ ! -e "$work/none" ] || fail "no such pid: a run directory was made"

sleep 30 & sl=$!; pids+=("$sl")
if [ "$(id -u)" = 0 ] && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$P"; then
    setpriv --reuid=65534 --regid=65534 --clear-groups "$P" attach -o /tmp/pl-attach-other-$$ "$sl" \
        >"$work/other.out" 2>"$work/other.err"; rc=$?
    [ "$rc" = 2 ] || fail "another user's process: exit $rc"
    [ "$(cat "$work/other.err")" = "plateau attach: pid $sl belongs to uid 0, not to you (uid 65534): its /proc files are not readable (permission denied); run plateau attach as that user or as root" ] ||
        fail "another user's process: $(cat "$work/other.err")"
    [ ! -e /tmp/pl-attach-other-$$ ] || fail "another user's process: a run directory was made"
else
    echo "skip: another user's process (not root, or setpriv cannot switch to nobody, or $P is not theirs to run)"
fi

"$P" attach -o "$work/intr" --no-live "$sl" >"$work/intr.out" 2>"$work/intr.err" & ap=$!
for _ in $(seq 1 100); do grep -q 'following pid' "$work/intr.err" 2>/dev/null && break; sleep 0.05; done
sleep 0.5
kill -INT "$ap"; wait "$ap"; rc=$?
[ "$rc" = 0 ] || fail "Ctrl-C: exit $rc"
grep -q '^plateau attach: stopped by Ctrl-C (SIGINT): the job runs on, untouched; 1 process followed up to now$' \
    "$work/intr.err" || fail "Ctrl-C: not said"
kill -0 "$sl" 2>/dev/null || fail "Ctrl-C: the job did not run on"
grep -q '^verdict: ' "$work/intr.out" || fail "Ctrl-C: no report"
echo "ok: attach judged a host leak, a plateau, device memory; stopped a leak; the four lines are clear"
