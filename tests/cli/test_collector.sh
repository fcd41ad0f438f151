#!/bin/sh
# Under plateau run the tracer takes no thread and no descriptor from the program (docs/env.md, "What the tracer
# takes from the program"): its records reach the trace through plateau run's collector.
# - Python 3.13's os.fork() in a traced script prints nothing more than untraced (CPython warns "This process ...
#   is multi-threaded" when /proc/self/stat counts more than one thread at fork).
# - /proc/self/task of a traced C program lists exactly its own threads, with their names.
# - Under `ulimit -n 20` a traced program opens as many files as untraced.
# - Under RLIMIT_NPROC a traced program starts as many threads as untraced. The program needs a non-root uid of
#   its own (RLIMIT_NPROC does not bind root, and plateau run's processes must not share the program's uid):
#   as root it runs as nobody (setpriv, with CAP_DAC_OVERRIDE to write the run directory); otherwise skipped.
# - A program killed with SIGKILL right after its last step loses none of its steps: the ring file outlives it and
#   the collector drains it (the in-process writer loses up to PLATEAU_FLUSH_MS).
# - plateau run itself killed (SIGKILL) while the program runs: the collector goes on until the program ends, then
#   drains its ring and exits.
# Each traced run must also have recorded: its traces are there, no ring file is left, and the report reads them.
# usage: test_collector.sh PLATEAU TARGETS_DIR WORKDIR
set -eu
P=$(realpath "$1") T=$(realpath "$2") work=$3/collector-$$
rm -rf "$work"; mkdir -p "$work"; chmod 755 "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.txt; do echo "== $f"; cat "$f"; done >&2; exit 1; }
L=$T/target_limits
# Is pid $1 running (not gone, not a zombie nobody reaped)?
running() { [ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# A traced run in "$work/$1" (the rest: the command): it recorded, and left no ring behind.
traced() {
    name=$1; shift
    "$P" run --no-report --no-live -o "$work/$name" -- "$@" >"$work/$name-run.txt" 2>&1 ||
        fail "$name: plateau run failed"
    n=$(ls "$work/$name"/*.pltrace 2>/dev/null | wc -l)
    [ "$n" -ge 1 ] || fail "$name: no trace recorded"
    ! ls "$work/$name"/*.ring >/dev/null 2>&1 || fail "$name: ring files left: $(ls "$work/$name")"
    "$P" report "$work/$name" >"$work/$name-report.txt" 2>&1 || fail "$name: plateau report failed"
    grep -q "^process " "$work/$name-report.txt" || fail "$name: the report shows no process"
}

# --- (1) Python 3.13: os.fork() prints no DeprecationWarning ---
py=""
for d in "$(pyenv root 2>/dev/null || true)" "${HOME:-/root}/.pyenv"; do
    for c in "$d"/versions/3.13*/bin/python3.13; do [ -x "$c" ] && py=$c && break 2; done
done
if [ -n "$py" ]; then
    cat >"$work/fork.py" <<'PY'
import os
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print("parent done")
PY
    "$py" "$work/fork.py" >"$work/fork-untraced.out" 2>"$work/fork-untraced.err"
    traced fork sh -c "exec '$py' '$work/fork.py' >'$work/fork-traced.out' 2>'$work/fork-traced.err'"
    n=$(ls "$work/fork"/*.pltrace | wc -l)
    [ "$n" -ge 2 ] || fail "fork: $n traces, expected the script and its fork child"
    cmp "$work/fork-untraced.err" "$work/fork-traced.err" ||
        fail "python 3.13 fork: stderr differs: $(cat "$work/fork-traced.err")"
    cmp "$work/fork-untraced.out" "$work/fork-traced.out" || fail "python 3.13 fork: stdout differs"
else
    echo "SKIP (1): no Python 3.13 found under pyenv"
fi

# --- (2) /proc/self/task shows exactly the program's threads ---
"$L" tasks 2 >"$work/tasks-untraced.txt" 2>&1 || fail "tasks untraced"
traced tasks sh -c "exec '$L' tasks 2 >'$work/tasks-traced.txt' 2>&1"
cmp "$work/tasks-untraced.txt" "$work/tasks-traced.txt" || fail "tasks: the traced program sees other threads"
grep -q "^3 tasks" "$work/tasks-traced.txt" || fail "tasks: expected the main thread and two workers"

# --- (3) ulimit -n 20: as many files traced as untraced ---
sh -c "ulimit -n 20 && exec '$L' fds" >"$work/fds-untraced.txt" 2>&1 || fail "fds untraced"
traced fds sh -c "ulimit -n 20 && exec '$L' fds >'$work/fds-traced.txt' 2>&1"
cmp "$work/fds-untraced.txt" "$work/fds-traced.txt" || fail "fds: traced $(cat "$work/fds-traced.txt") vs untraced $(cat "$work/fds-untraced.txt")"

# --- (4) RLIMIT_NPROC: as many threads traced as untraced (a uid of the program's own) ---
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && command -v prlimit >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    as_nobody="setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=+dac_override --ambient-caps=+dac_override"
    others=$(ps -u 65534 -L --no-headers 2>/dev/null | wc -l)
    lim=$((others + 20))
    $as_nobody prlimit --nproc=$lim "$L" threads >"$work/nproc-untraced.txt" 2>&1 || fail "nproc untraced"
    traced nproc sh -c "exec $as_nobody prlimit --nproc=$lim '$L' threads >'$work/nproc-traced.txt' 2>&1"
    cmp "$work/nproc-untraced.txt" "$work/nproc-traced.txt" ||
        fail "RLIMIT_NPROC: traced $(cat "$work/nproc-traced.txt") vs untraced $(cat "$work/nproc-untraced.txt")"
else
    echo "SKIP (4): RLIMIT_NPROC needs the program under a non-root uid of its own (run as root, with setpriv)"
fi
# --- (5) SIGKILL right after the last step: every step is in the trace ---
"$P" run --no-report --no-live -o "$work/kill" -- "$L" steps 60 >"$work/kill-out.txt" 2>&1 &
run_pid=$!
i=0
until grep -q "^step 60$" "$work/kill-out.txt"; do
    i=$((i + 1)); [ $i -lt 400 ] || fail "kill: the program did not reach step 60"; sleep 0.05
done
kill -KILL "$(sed -n 's/^pid //p' "$work/kill-out.txt")"
wait $run_pid || true
! ls "$work/kill"/*.ring >/dev/null 2>&1 || fail "kill: ring file left"
"$P" report "$work/kill" --json "$work/kill.json" >"$work/kill-report.txt" 2>&1 || true
# the last step whose exact heap totals the trace holds
n=$(python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
print(max([m["last_step"] or 0 for m in p["metrics"] if m["name"] == "heap.count"] + [0]))' "$work/kill.json")
[ "$n" = 60 ] || fail "kill: $n of 60 steps in the trace after SIGKILL"

# --- (6) plateau run killed: its collector drains the program's ring once the program ends ---
"$P" run --no-report --no-live -o "$work/orphan" -- "$L" steps 30 >"$work/orphan-out.txt" 2>&1 &
run_pid=$!
i=0
until grep -q "^step 30$" "$work/orphan-out.txt"; do
    i=$((i + 1)); [ $i -lt 400 ] || fail "orphan: the program did not reach step 30"; sleep 0.05
done
coll=$(pgrep -P $run_pid -x plateau-collect || true)
[ -n "$coll" ] || fail "orphan: no collector under plateau run"
kill -KILL $run_pid
wait $run_pid 2>/dev/null || true
sleep 0.3
running "$coll" || fail "orphan: the collector ended with plateau run while the program runs"
kill -TERM "$(sed -n 's/^pid //p' "$work/orphan-out.txt")"
i=0
while running "$coll"; do
    i=$((i + 1)); [ $i -lt 200 ] || fail "orphan: the collector outlived the program by 10 s"; sleep 0.05
done
! ls "$work/orphan"/*.ring >/dev/null 2>&1 || fail "orphan: ring file left"
"$P" report "$work/orphan" --json "$work/orphan.json" >"$work/orphan-report.txt" 2>&1 || true
n=$(python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["processes"][0]
print(max([m["last_step"] or 0 for m in p["metrics"] if m["name"] == "heap.count"] + [0]))' "$work/orphan.json")
[ "$n" = 30 ] || fail "orphan: $n of 30 steps in the trace"
echo "ok"
