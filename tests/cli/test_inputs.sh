#!/bin/sh
# Hardening of the readers' inputs, without the preload: plateau report, tune and replay on run
# directories holding things that are not traces. Every command runs under `timeout` as a hang guard only.
#   - a FIFO named *.pltrace is never opened (it used to block every reader forever): skipped and named
#   - a report written to a full disk (/dev/full) says "No space left on device" (it said "Input/output error")
# usage: test_inputs.sh PLATEAU REPORT_GEN TUNE_GEN WORKDIR
set -eu
P=$1 RGEN=$2 TGEN=$3 work=$4/inputs-$$
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
T="timeout 20"

# --- F2: FIFOs ---
mkdir "$work/fifo"
mkfifo "$work/fifo/x.pltrace"
rc=0; $T "$P" report "$work/fifo" >"$work/o" 2>"$work/e" || rc=$?
[ $rc = 1 ] || { cat "$work/o" "$work/e"; fail "report of a FIFO-only directory: exit $rc (124 = hung)"; }
grep -q 'x.pltrace: a FIFO, not a regular file' "$work/e" || { cat "$work/e"; fail "FIFO not named"; }
rc=0; $T "$P" report "$work/fifo/x.pltrace" >"$work/o" 2>"$work/e" || rc=$?
[ $rc = 1 ] || fail "report of a FIFO given by name: exit $rc"
grep -q 'a FIFO, not a regular file' "$work/e" || { cat "$work/e"; fail "FIFO by name not named"; }
# beside a real trace: the report is made, the FIFO named as skipped
"$RGEN" "$work/fifo/1.0.pltrace" 100000 20
rc=0; $T "$P" report "$work/fifo" >"$work/o" 2>"$work/e" || rc=$?
[ $rc = 0 ] || { cat "$work/o" "$work/e"; fail "report beside a FIFO: exit $rc"; }
grep -q 'skipped 1 file: .*x.pltrace: a FIFO' "$work/o" || { cat "$work/o"; fail "skip not said"; }
# tune and replay
mkdir "$work/tfifo"
"$TGEN" frag "" "$work/tfifo/1.0.pltrace"
mkfifo "$work/tfifo/x.pltrace"
rc=0; $T "$P" tune "$work/tfifo" >"$work/o" 2>"$work/e" || rc=$?
[ $rc = 0 ] || { cat "$work/o" "$work/e"; fail "tune beside a FIFO: exit $rc"; }
grep -q 'skipped 1 file(s) that are not regular files: .*x.pltrace: a FIFO' "$work/o" || { cat "$work/o"; fail "tune skip"; }
rc=0; $T "$P" replay "$work/tfifo" --conf "" >"$work/o" 2>"$work/e" || rc=$?
[ $rc = 0 ] || { cat "$work/o" "$work/e"; fail "replay beside a FIFO: exit $rc"; }
grep -q 'x.pltrace: a FIFO' "$work/e" || { cat "$work/e"; fail "replay skip"; }
rc=0; $T "$P" replay "$work/fifo/x.pltrace" --conf "" >"$work/o" 2>"$work/e" || rc=$?
[ $rc = 1 ] || fail "replay of a FIFO given by name: exit $rc"
rm "$work/tfifo/1.0.pltrace"
rc=0; $T "$P" tune "$work/tfifo" >"$work/o" 2>"$work/e" || rc=$?
[ $rc = 1 ] || fail "tune of a FIFO-only directory: exit $rc"
grep -q 'a FIFO' "$work/e" || { cat "$work/e"; fail "tune FIFO-only message"; }

# --- a full disk: the errno of the failing write, for every output ---
if [ -w /dev/full ]; then
    for out in "--json /dev/full" "--html /dev/full"; do
        rc=0; $T "$P" report "$work/fifo/1.0.pltrace" $out >"$work/o" 2>"$work/e" || rc=$?
        [ $rc = 1 ] || fail "report $out: exit $rc"
        grep -q 'No space left on device' "$work/e" || { cat "$work/e"; fail "report $out: not ENOSPC"; }
    done
    rc=0; $T "$P" report "$work/fifo/1.0.pltrace" >/dev/full 2>"$work/e" || rc=$?
    [ $rc = 1 ] || fail "report to a full stdout: exit $rc"
    grep -q 'No space left on device' "$work/e" || { cat "$work/e"; fail "report to a full stdout: not ENOSPC"; }
    "$TGEN" frag "" "$work/frag.pltrace"
    rc=0; $T "$P" tune "$work/frag.pltrace" --json /dev/full >"$work/o" 2>"$work/e" || rc=$?
    [ $rc = 1 ] && grep -q 'No space left on device' "$work/e" || { cat "$work/e"; fail "tune --json: not ENOSPC"; }
    rc=0; $T "$P" replay "$work/frag.pltrace" --conf "" --json /dev/full >"$work/o" 2>"$work/e" || rc=$?
    [ $rc = 1 ] && grep -q 'No space left on device' "$work/e" || { cat "$work/e"; fail "replay --json: not ENOSPC"; }
fi

echo "ok"
