#!/bin/sh
# Integration: signals and plateau run. plateau run runs in its own session (setsid), so its process
# group can be signalled as systemd, `kill 0` or job control would; target_graceful exits 0 after one SIGTERM and
# 42 when a second one reaches it during its graceful shutdown. The waits give up after 20 s (hang guard only).
#   - a signal sent to the process group reaches the program once (it used to be forwarded a second time)
#   - signals sent to plateau alone (USR1 as Slurm's --signal sends, ALRM, PIPE, HUP, TERM) reach the program
#     and do not kill plateau (they used to kill it and orphan the program)
#   - SIGTSTP sent to plateau reaches the program and stops plateau; SIGCONT continues plateau, reaches the program
#   - plateau killed by SIGKILL: the program runs on, its witness goes, and `plateau report DIR` reports it later
# usage: test_signals.sh PLATEAU TARGETS_DIR WORKDIR
set -eu
P=$1 T=$2 work=$3/signals-$$
rm -rf "$work"; mkdir -p "$work"
pid=
trap '[ -n "$pid" ] && kill -KILL -$pid 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.out "$work"/*.err; do echo "== $f"; cat "$f"; done >&2; exit 1; }

# wait_for FILE TEXT: until TEXT is in FILE (hang guard 20 s)
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 400 ] || fail "'$2' never appeared in $1"
        sleep 0.05
    done
}
# state PID: the process state letter (R, S, T, ...)
state() { sed 's/^.*) //' "/proc/$1/stat" | cut -c1; }
# wait_state PID LETTER
wait_state() {
    i=0
    while [ "$(state "$1")" != "$2" ]; do
        i=$((i + 1)); [ $i -lt 400 ] || fail "pid $1 never reached state $2 (is $(state "$1"))"
        sleep 0.05
    done
}
# start NAME: plateau run -- target_graceful in a new session; pid = plateau's pid = its process group
start() {
    setsid "$P" run -o "$work/$1" -- "$T/target_graceful" >"$work/$1.out" 2>"$work/$1.err" &
    pid=$!
    wait_for "$work/$1.out" '^ready'
}
finish() { rc=0; wait $pid || rc=$?; pid=; }

# --- F4: the process group gets SIGTERM: the program sees it once and shuts down cleanly ---
start group
kill -TERM -$pid
finish
grep -q 'shutdown after 1 SIGTERM' "$work/group.out" || fail "group SIGTERM reached the program twice (rc $rc)"
[ $rc = 0 ] || fail "group SIGTERM: exit $rc, expected the program's 0"
grep -q 'plateau report:' "$work/group.out" || fail "no report after a group SIGTERM"

# a group SIGUSR1 then SIGTERM to plateau alone: each reaches the program exactly once
start mixed
kill -USR1 -$pid
wait_for "$work/mixed.out" 'got USR1'
kill -TERM $pid
finish
[ $rc = 0 ] || fail "mixed: exit $rc"
grep -q 'counts: .* TERM=1 USR1=1 ' "$work/mixed.out" || fail "mixed: wrong counts"

# --- F7: signals sent to plateau alone reach the program and do not kill plateau ---
# Run under nohup (SIGHUP ignored from the start, inherited by plateau and the program), plateau leaves SIGHUP
# ignored as nohup asked and the program never sees it: then HUP is not sent here.
hup_ignored=$(( 0x$(awk '/^SigIgn:/ {print $2}' /proc/$$/status) & 1 ))
sigs="USR1 ALRM PIPE HUP USR2"
want_hup=1
[ "$hup_ignored" = 1 ] && { sigs="USR1 ALRM PIPE USR2"; want_hup=0; echo "note: SIGHUP is ignored here (nohup): not sent"; }
start direct
for s in $sigs; do
    kill -$s $pid
    wait_for "$work/direct.out" "got $s"
done
kill -TERM $pid
finish
[ $rc = 0 ] || fail "direct signals: exit $rc (plateau killed?)"
grep -q "counts: HUP=$want_hup INT=0 QUIT=0 TERM=1 USR1=1 USR2=1 ALRM=1 PIPE=1" "$work/direct.out" ||
    fail "direct signals: wrong counts"
grep -q 'plateau report:' "$work/direct.out" || fail "no report after direct signals"

# --- stop and continue: SIGTSTP sent to plateau reaches the program (which counts it rather than stop: in this
# orphaned process group the kernel would discard its default stop) and stops plateau; SIGCONT continues plateau
# and reaches the program once ---
start stop
kill -TSTP $pid
wait_for "$work/stop.out" 'got TSTP'
wait_state $pid T
kill -CONT $pid
wait_for "$work/stop.out" 'got CONT'
kill -TERM $pid
finish
[ $rc = 0 ] || fail "after stop/continue: exit $rc"
grep -q 'counts: .* TERM=1 .* CONT=1 TSTP=1' "$work/stop.out" || fail "stop: SIGTSTP/SIGCONT not relayed once"

# --- plateau run must die (SIGKILL): the program runs on and is reported later ---
start killed
child=$(pgrep -P $pid -x target_graceful || true)
[ -n "$child" ] || fail "no target_graceful child of plateau"
pg=$pid
kill -KILL $pid
finish 2>/dev/null
[ -d "/proc/$child" ] || fail "the program died with plateau"
i=0
while [ -n "$(pgrep -g "$pg" -x plateau || true)" ]; do # the witness, in plateau's process group, goes too
    i=$((i + 1)); [ $i -lt 400 ] || fail "plateau's witness outlived it"
    sleep 0.05
done
kill -TERM "$child"
i=0
while [ -d "/proc/$child" ]; do
    i=$((i + 1)); [ $i -lt 400 ] || fail "the program did not end"
    sleep 0.05
done
"$P" report "$work/killed" >"$work/killed-report.out" 2>&1 || fail "report after plateau was killed"
grep -q 'target_graceful' "$work/killed-report.out" || fail "the program is not in the later report"

echo ok
