#!/bin/bash
# Integration: plateau run's supervision never changes what the program does, and a stop hits the process that leaks.
# One case per meson test (cli.supervise_CASE), each on tests/targets/leakc.c (a C loop keeping BYTES per step).
#   fsize   `ulimit -f 50`: the trace stops at the limit with one line; the program runs to its end, exit 0 (SIGXFSZ
#           used to kill it: 153)
#   pdeath  plateau run --live SIGKILLed: its watcher (the live line) goes with it, so a pipeline `plateau run | cat`
#           ends (the watcher used to run on for good, holding the pipe); the program runs on
# Waits are hang guards only (20 s and more), never timings the test depends on.
# usage: test_supervise.sh CASE PLATEAU TARGETS_DIR WORKDIR
set -u
case_=$1 P=$2 T=$3 work=$4/supervise-$1-$$
L=$T/target_leakc
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL ($case_): $*" >&2; for f in "$work"/*.out "$work"/*.err; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done >&2; exit 1; }

case_fsize() {
    bash -c "ulimit -f 50; exec \"$P\" run --no-live --no-report -o \"$work/run\" -- \"$L\" 300 65536 0 2000" \
        >"$work/fsize.out" 2>"$work/fsize.err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit $rc under ulimit -f 50, not the program's 0"
    grep -qx done "$work/fsize.out" || fail "the program did not run to its end"
    [ "$(grep -c 'file-size limit (ulimit -f, 51200 bytes): recording stopped' "$work/fsize.err")" = 1 ] \
        || fail "not one line about the file-size limit"
    for f in "$work"/run/*.pltrace; do
        [ "$(stat -c %s "$f")" -le 51200 ] || fail "$f is past the limit"
    done
    "$P" report "$work/run" >"$work/report.out" 2>&1 || fail "the trace kept is not readable"
    echo "ok: ulimit -f 50: exit 0, one line, trace kept up to the limit"
}

case_pdeath() {
    mkfifo "$work/pipe"
    cat "$work/pipe" >"$work/pipe.out" &
    catpid=$!
    setsid "$P" run --live --live-interval 0.1 --no-report -o "$work/run" -- "$L" 100000 64 0 100000 \
        >"$work/pipe" 2>"$work/run.err" &
    ppid_=$!
    watcher=
    for _ in $(seq 1 400); do  # hang guard: the watcher is plateau's child at nice 10
        watcher=$(ps -o pid=,ni= --ppid $ppid_ 2>/dev/null | awk '$2 == 10 {print $1}')
        [ -n "$watcher" ] && break
        sleep 0.05
    done
    [ -n "$watcher" ] || fail "no watcher process found"
    prog=$(ps -o pid=,comm= --ppid $ppid_ | awk '$2 == "target_leakc" {print $1}')
    [ -n "$prog" ] || fail "no program process found"
    kill -KILL $ppid_
    for _ in $(seq 1 400); do kill -0 "$watcher" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$watcher" 2>/dev/null; then kill -KILL "$watcher" $prog; fail "the watcher runs on after plateau run was killed"; fi
    kill -0 "$prog" 2>/dev/null || fail "the program did not run on"
    kill -KILL "$prog"
    for _ in $(seq 1 400); do kill -0 "$catpid" 2>/dev/null || break; sleep 0.05; done
    kill -0 "$catpid" 2>/dev/null && { kill "$catpid"; fail "the pipeline's reader never saw the end"; }
    echo "ok: plateau run SIGKILLed: its watcher went with it, the pipeline ended"
}

"case_$case_"
