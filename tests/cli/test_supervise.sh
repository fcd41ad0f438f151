#!/bin/bash
# Integration: plateau run's supervision never changes what the program does, and a stop hits the process that leaks.
# One case per meson test (cli.supervise_CASE), each on tests/targets/leakc.c (a C loop keeping BYTES per step).
#   fsize   `ulimit -f 50`: the trace stops at the limit with one line; the program runs to its end, exit 0 (SIGXFSZ
#           used to kill it: 153)
#   stopjob --stop-on-leak on `bash -c 'leakc ...; echo after'`: the leaking leakc is stopped (it used to be bash
#           alone, leakc leaking on, orphaned), then bash, before it runs `echo after`; both named on stderr and in
#           run.stopped; exit 3
#   warmups 85-, 400- and 1000-step warmups (256 KiB/step, then flat) run to their end under --stop-on-leak (the
#           400-step one used to be stopped at step 282)
#   limit   a leak near its memory limit (PLATEAU_HOST_MEMORY=300M) is stopped before it reaches it, a warmup whose
#           limit is further than 60 s at its rate is not; with
#           --warmup-steps N, a leak past N is stopped far from any limit, a warmup shorter than N is not
#   status  run.status: a FIFO planted under that name hangs neither `plateau report` nor `plateau run --append` (they
#           used to wait on it for good), one line says it; two `--append` runs at once each keep their line; the
#           live line of an appended run does not say "[run ended]" from the start (the earlier run's line)
#   argv0   a program named ESC ] 0 ; X BEL (exec -a) shows escaped in the live line of plateau run, in plateau watch
#           and in the CSV process column (they printed it raw)
#   watch   `plateau watch FILE` says it is not a directory (it said "Permission denied"); `watch --once` on a missing
#           directory says so and exits 1 (it waited for good)
#   exit3   under --fail-on-leak, a program's own exit 3 is said to be its own (it read as a leak)
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
    # 2000 steps: packed records (trace format 2.0) put 300 steps in ~15 KB, under the limit
    bash -c "ulimit -f 50; exec \"$P\" run --no-live --no-report -o \"$work/run\" -- \"$L\" 2000 65536 0 2000" \
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

# stop_step FILE: the step the live line that decided the stop was at
stop_step() { sed -n 's/.*stopping pid [0-9]* ([^)]*) with SIGTERM: .* step \([0-9]*\) .*/\1/p' "$1" | head -1; }

case_stopjob() {
    PLATEAU_HOST_MEMORY=300M "$P" run --no-live --no-report --stop-on-leak --live-interval 0.2 -o "$work/run" -- \
        bash -c "\"$L\" 3000 262144 0 5000; echo after" >"$work/job.out" 2>"$work/job.err"
    rc=$?
    [ $rc -eq 3 ] || fail "exit $rc, not 3 (stopped on a leak)"
    grep -q after "$work/job.out" && fail "the shell went on to its next command"
    grep -qx done "$work/job.out" && fail "the leaking program ran to its end"
    leaker=$(sed -n 's/.*stopping pid \([0-9]*\) (target_leakc) with SIGTERM.*/\1/p' "$work/job.err")
    [ -n "$leaker" ] || fail "the leaking process is not the one stopped"
    grep -q "ending the rest of the job with SIGTERM: pid [0-9]* (bash)" "$work/job.err" || fail "bash not named"
    grep -q "^pid $leaker (target_leakc) stopped on leak" "$work/run/run.stopped" || fail "run.stopped does not name it"
    grep -q "^then the rest of the job (SIGTERM): pid [0-9]* (bash)" "$work/run/run.stopped" || fail "run.stopped: bash"
    grep -q "exit 3: the job was stopped on a confirmed leak" "$work/job.err" || fail "the exit status is not explained"
    for _ in $(seq 1 400); do  # hang guard: gone, or a zombie its new parent has not reaped yet
        st=$(sed 's/^.*) //' "/proc/$leaker/stat" 2>/dev/null | cut -c1)
        [ -z "$st" ] || [ "$st" = Z ] && break
        sleep 0.05
    done
    [ -z "$st" ] || [ "$st" = Z ] || { kill -KILL "$leaker"; fail "the leaking process runs on (state $st)"; }
    # the command itself leaking: it alone is stopped
    PLATEAU_HOST_MEMORY=300M "$P" run --no-live --no-report --stop-on-leak --live-interval 0.2 -o "$work/run2" -- \
        "$L" 3000 262144 0 5000 >"$work/self.out" 2>"$work/self.err"
    rc=$?
    [ $rc -eq 3 ] || fail "the command leaking: exit $rc, not 3"
    grep -q "rest of the job" "$work/self.err" && fail "a job above the command was stopped"
    echo "ok: the leaking process stopped, then its shell; exit 3"
}

case_warmups() {
    for w in 85 400 1000; do  # a 64 GiB host whatever this machine has: at most 50 MB/s, minutes from its limit
        PLATEAU_HOST_MEMORY=64G "$P" run --no-live --no-report --stop-on-leak --live-interval 0.2 -o "$work/w$w" -- \
            "$L" $((w + 200)) 262144 $w 5000 >"$work/w$w.out" 2>"$work/w$w.err"
        rc=$?
        [ $rc -eq 0 ] || fail "a $w-step warmup: exit $rc"
        grep -qx done "$work/w$w.out" || fail "a $w-step warmup was stopped"
        [ -e "$work/w$w/run.stopped" ] && fail "a $w-step warmup has run.stopped"
        echo "ok: a $w-step warmup ran to its end"
    done
}

case_limit() {
    # 256 KiB/step reaches 300 MiB at step 1200: stopped well before
    PLATEAU_HOST_MEMORY=300M "$P" run --no-live --no-report --stop-on-leak --live-interval 0.2 -o "$work/near" -- \
        "$L" 3000 262144 0 5000 >"$work/near.out" 2>"$work/near.err"
    rc=$?
    [ $rc -eq 3 ] || fail "a leak near its limit: exit $rc, not 3"
    step=$(stop_step "$work/near.err")
    [ -n "$step" ] && [ "$step" -lt 1200 ] || fail "not stopped before its limit (step '$step')"
    # a 400-step warmup (to 100 MiB) under a 4 GiB limit: at most 200 steps/s (5 ms sleeps) of 256 KiB, the limit is
    # more than 60 s away at its rate, so it is no evidence against a warmup (under 300 MiB it would be: stopped)
    PLATEAU_HOST_MEMORY=4G "$P" run --no-live --no-report --stop-on-leak --live-interval 0.2 -o "$work/nearw" -- \
        "$L" 600 262144 400 5000 >"$work/nearw.out" 2>"$work/nearw.err"
    rc=$?
    [ $rc -eq 0 ] && grep -qx done "$work/nearw.out" || fail "a 400-step warmup under a 4 GiB limit was stopped"
    # --warmup-steps: the user's word that growth past N is no warmup
    PLATEAU_HOST_MEMORY=64G "$P" run --no-live --no-report --stop-on-leak --warmup-steps 100 --live-interval 0.2 \
        -o "$work/decl" -- \
        "$L" 3000 262144 0 5000 >"$work/decl.out" 2>"$work/decl.err"
    rc=$?
    [ $rc -eq 3 ] || fail "a leak past --warmup-steps 100: exit $rc, not 3"
    step=$(stop_step "$work/decl.err")
    [ -n "$step" ] && [ "$step" -gt 100 ] || fail "stopped at step '$step', not past the declared warmup"
    PLATEAU_HOST_MEMORY=64G "$P" run --no-live --no-report --stop-on-leak --warmup-steps 500 --live-interval 0.2 \
        -o "$work/declw" -- \
        "$L" 800 262144 400 5000 >"$work/declw.out" 2>"$work/declw.err"
    rc=$?
    [ $rc -eq 0 ] && grep -qx done "$work/declw.out" || fail "a 400-step warmup under --warmup-steps 500 was stopped"
    echo "ok: stopped near the limit (step $step) and past --warmup-steps; warmups run on"
}

case_status() {
    d=$work/run
    "$P" run --no-live --no-report -o "$d" -- "$L" 20 64 0 1000 >/dev/null 2>&1 || fail "the first run failed"
    rm "$d/run.status" && mkfifo "$d/run.status"
    timeout 20 "$P" report "$d" >"$work/report.out" 2>&1
    rc=$?
    [ $rc -eq 124 ] && fail "plateau report waits on a FIFO named run.status"
    grep -q "^verdict:" "$work/report.out" || fail "no report beside a FIFO named run.status"
    timeout 20 "$P" run --append --no-live --no-report -o "$d" -- "$L" 20 64 0 1000 >"$work/append.out" 2>"$work/append.err"
    rc=$?
    [ $rc -eq 124 ] && fail "plateau run --append waits on a FIFO named run.status"
    [ $rc -eq 0 ] || fail "plateau run --append beside a FIFO: exit $rc"
    [ "$(grep -c "run.status is not a regular file" "$work/append.err")" = 1 ] || fail "not one line about the FIFO"
    # two runs appended at once: each keeps its own line
    rm "$d/run.status"
    "$P" run --append --no-live --no-report -o "$d" -- "$L" 100 64 0 2000 >/dev/null 2>&1 &
    a=$!
    "$P" run --append --no-live --no-report -o "$d" -- "$L" 100 64 0 2000 >/dev/null 2>&1 &
    b=$!
    wait $a || fail "the first of two runs failed"
    wait $b || fail "the second of two runs failed"
    [ "$(grep -cE '^pid [0-9]+ exit 0( oom_kill [0-9]+)?( host_oom_kill [0-9]+)?$' "$d/run.status")" = 2 ] || { cat "$d/run.status"; fail "not one line per run"; }
    [ "$(cut -d' ' -f2 "$d/run.status" | sort -u | wc -l)" = 2 ] || fail "the two lines are not of two commands"
    # the live line of a run appended to a directory whose earlier run ended does not say this one has ended
    "$P" run --append --live --live-interval 0.1 --no-report -o "$d" -- "$L" 200 64 0 5000 >/dev/null 2>"$work/al.err" \
        || fail "the appended live run failed"
    first=$(grep -m1 "^plateau: pid" "$work/al.err")
    [ -n "$first" ] || fail "no live line"
    case $first in *"[run ended]"*) fail "the appended run is said to have ended at once: $first" ;; esac
    echo "ok: run.status: no wait on a FIFO; one line per appended run"
}

case_argv0() {
    ESC=$(printf '\033') BEL=$(printf '\007')
    "$P" run --live --live-interval 0.1 --no-report -o "$work/run" -- \
        bash -c 'exec -a "$(printf "\033]0;X\007")" "$0" 300 64 0 2000' "$L" >"$work/live.out" 2>"$work/live.err" \
        || fail "plateau run failed"
    "$P" watch --once "$work/run" >"$work/watch.out" 2>&1 || fail "plateau watch failed"
    "$P" report "$work/run" --csv "$work/run.csv" >/dev/null 2>&1 || fail "plateau report --csv failed"
    for f in live.err watch.out run.csv; do
        grep -q "[$ESC$BEL]" "$work/$f" && fail "$f: a raw ESC or BEL byte"
        grep -qF '\x1b]0;X\x07' "$work/$f" || fail "$f: the name is not there, escaped"
    done
    echo "ok: argv[0] escaped in the live line, watch and the CSV"
}

case_watch() {
    "$P" run --no-live --no-report -o "$work/run" -- "$L" 20 64 0 1000 >/dev/null 2>&1 || fail "the run failed"
    f=$(ls "$work"/run/*.pltrace | head -1)
    timeout 20 "$P" watch --once "$f" >"$work/file.out" 2>&1
    rc=$?
    [ $rc -eq 1 ] || fail "watch FILE: exit $rc, not 1"
    grep -q "is not a directory: give the run directory" "$work/file.out" || fail "watch FILE: not said"
    grep -q "Permission denied" "$work/file.out" && fail "watch FILE: says Permission denied"
    timeout 20 "$P" watch --once "$work/missing" >"$work/missing.out" 2>&1
    rc=$?
    [ $rc -eq 124 ] && fail "watch --once waits for a missing directory"
    [ $rc -eq 1 ] || fail "watch --once on a missing directory: exit $rc, not 1"
    grep -q "^plateau watch: $work/missing does not exist$" "$work/missing.out" || fail "watch --once: not said"
    echo "ok: watch FILE and watch --once MISSING say what is wrong"
}

case_exit3() {
    "$P" run --no-live --fail-on-leak -o "$work/run" -- bash -c "\"$L\" 50 64 0 1000 >/dev/null; exit 3" \
        >"$work/own.out" 2>"$work/own.err"
    rc=$?
    [ $rc -eq 3 ] || fail "the command's own 3: exit $rc"
    grep -q "^plateau: exit 3 is the command's own status; the run does not leak" "$work/own.err" || fail "not said"
    grep -q "the run leaks" "$work/own.err" && fail "a leak is claimed"
    echo "ok: a program's own exit 3 is named as its own"
}

"case_$case_"
