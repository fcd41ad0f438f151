#!/bin/bash
# Integration: plateau run's supervision never changes what the program does, and a stop hits the process that leaks.
# One case per meson test (cli.supervise_CASE), each on tests/targets/leakc.c (a C loop keeping BYTES per step).
#   fsize   `ulimit -f 50`: the trace stops at the limit with one line; the program runs to its end, exit 0 (SIGXFSZ
#           used to kill it: 153)
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

"case_$case_"
