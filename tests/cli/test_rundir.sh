#!/bin/sh
# Integration: plateau run's run directory is trusted only when it is ours. plateau run makes the
# directory itself or takes an empty one of ours that no one else can write, never a symbolic link, and refuses a
# non-empty one unless --append; every process of a run carries the run's id in its trace header (trace 1.4,
# PLATEAU_RUN_ID, put back by the tracer when a program execs with an empty environment), and the report reads
# only traces of that run, owned by the directory's owner: a trace planted by another user or left by an earlier
# run is skipped and named, never merged. A FIFO planted in an appended directory does not hang plateau run.
# usage: test_rundir.sh PLATEAU TARGETS_DIR WORKDIR
set -eu
P=$1 T=$2 work=$3/rundir-$$
rm -rf "$work"; mkdir -p "$work"; chmod 700 "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.txt; do echo "== $f"; cat "$f"; done >&2; exit 1; }
root=false; [ "$(id -u)" = 0 ] && root=true

# a leaking run whose trace others could plant
"$P" run -o "$work/leak" --no-report -- "$T/target_leak" 5 >"$work/leak.txt" 2>&1 || fail "leak run"
leak=$(ls "$work/leak/"*.pltrace | head -n1)

# --- re-used -o: refused with one line; --append adds to the run, reported together ---
"$P" run -o "$work/r" -- /bin/true >"$work/r1.txt" 2>&1 || fail "first run"
rc=0; "$P" run -o "$work/r" -- /bin/true >"$work/r2.txt" 2>&1 || rc=$?
[ $rc = 2 ] || fail "re-used run directory: exit $rc, expected 2"
[ "$(wc -l <"$work/r2.txt")" = 1 ] || fail "re-used run directory: not one line"
grep -q "is not empty .*--append" "$work/r2.txt" || fail "re-used run directory: message"
"$P" run -o "$work/r" --append -- /bin/true >"$work/r3.txt" 2>&1 || fail "--append run"
grep -q "2 trace files in" "$work/r3.txt" || fail "--append: both runs' traces not counted"
"$P" report "$work/r" >"$work/r4.txt" 2>&1 || fail "report of the appended run"
grep -q "skipped" "$work/r4.txt" && fail "appended run: a trace was skipped"

# --- a trace of another run copied into a run directory: skipped, named, not merged ---
"$P" run -o "$work/v" -- /bin/true >"$work/v1.txt" 2>&1 || fail "victim run"
cp "$leak" "$work/v/999.0.pltrace"
"$P" report "$work/v" >"$work/v2.txt" 2>&1 || fail "report with a copied trace"
grep -q "leaking" "$work/v2.txt" && fail "a trace of another run was merged into the report"
grep -q "999.0.pltrace: from another run" "$work/v2.txt" || fail "copied trace not named as skipped"

# --- a trace owned by another user: skipped whatever its run id ---
if $root; then
    "$P" run -o "$work/u" -- /bin/true >"$work/u1.txt" 2>&1 || fail "run u"
    mkdir "$work/u2"; cp "$work/u/"*.pltrace "$work/u2/1.0.pltrace"; cp "$leak" "$work/u2/362.0.pltrace"
    chown 4242 "$work/u2/362.0.pltrace"
    "$P" report "$work/u2" >"$work/u2.txt" 2>&1 || fail "report with a foreign trace"
    grep -q "leaking" "$work/u2.txt" && fail "a trace planted by another user was merged into the report"
    grep -q "362.0.pltrace: owned by uid 4242, not by the directory's owner" "$work/u2.txt" || fail "foreign trace"
fi

# --- directories that are not ours: refused with one line ---
ln -s "$work/elsewhere" "$work/link"; mkdir "$work/elsewhere"; chmod 700 "$work/elsewhere"
rc=0; "$P" run -o "$work/link" -- /bin/true >"$work/l.txt" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "is a symbolic link" "$work/l.txt" || fail "symbolic link accepted (exit $rc)"
mkdir "$work/ww"; chmod 1777 "$work/ww"
rc=0; "$P" run -o "$work/ww" -- /bin/true >"$work/w.txt" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "is writable by others" "$work/w.txt" || fail "world-writable directory accepted (exit $rc)"
# --- the preload set by hand with a relative PLATEAU_DIR: one folder, next to the first process, made absolute
# for the children (a child that changed its working directory makes no folder of its own there) ---
pre=$(cd "$(dirname "$P")/../preload" && pwd)/libplateau_preload.so
mkdir -p "$work/rel/sub"
(cd "$work/rel" && LD_PRELOAD=$pre PLATEAU_DIR=rd PLATEAU_QUIET=1 sh -c 'cd sub && /bin/true') ||
    fail "relative PLATEAU_DIR run"
[ -d "$work/rel/rd" ] || fail "relative PLATEAU_DIR: no run folder next to the first process"
[ -e "$work/rel/sub/rd" ] && fail "relative PLATEAU_DIR: a child made a folder in its own working directory"
[ "$(ls "$work/rel/rd"/*.pltrace | wc -l)" -ge 2 ] || fail "relative PLATEAU_DIR: the child's trace is not there"

# --- a parent others may write (no sticky bit) could swap the run directory while the program runs: said once;
# under a parent only we write, or a sticky one (/tmp's mode), nothing is said ---
mkdir -p "$work/shared" "$work/sticky"; chmod 777 "$work/shared"; chmod 1777 "$work/sticky"
"$P" run --no-report -o "$work/shared/run" -- /bin/true >"$work/s.txt" 2>&1 || fail "run under a shared parent"
grep -q "warning: the parent of the run directory .* can be written by others (mode 777" "$work/s.txt" ||
    fail "a parent others can write is not said"
for ok in sticky .; do
    "$P" run --no-report -o "$work/$ok/run2" -- /bin/true >"$work/s.txt" 2>&1 || fail "run under $ok"
    grep -q "can be written by others" "$work/s.txt" && fail "a warning under $ok"
done
if $root; then
    mkdir "$work/theirs"; chmod 700 "$work/theirs"; chown 4242 "$work/theirs"
    rc=0; "$P" run -o "$work/theirs" -- /bin/true >"$work/t.txt" 2>&1 || rc=$?
    [ $rc = 2 ] && grep -q "belongs to uid 4242" "$work/t.txt" || fail "foreign directory accepted (exit $rc)"
fi

# --- every process of the run carries its id, also an image exec'd with an environment less LD_PRELOAD and
# PLATEAU_RUN_ID, and one exec'd with an empty environment (docs/env.md, "The program's environment") ---
"$P" run -o "$work/fe" -- "$T/target_forkexec" scrubenv >"$work/fe.txt" 2>&1 || fail "forkexec run"
grep -q "3 trace files in" "$work/fe.txt" || fail "forkexec: not 3 traces of this run"
grep -q "skipped" "$work/fe.txt" && fail "forkexec: a trace of this run was skipped"
"$P" run -o "$work/fe0" -- "$T/target_forkexec" clearenv >"$work/fe0.txt" 2>&1 || fail "forkexec clearenv run"
grep -q "3 trace files in" "$work/fe0.txt" || fail "forkexec clearenv: not 3 traces (the empty-environment image is traced)"
grep -q "skipped" "$work/fe0.txt" && fail "forkexec clearenv: a trace of this run was skipped"

# --- a FIFO planted in an appended run directory: plateau run does not hang, the FIFO is named ---
mkfifo "$work/r/666.0.pltrace"
rc=0; timeout 20 "$P" run -o "$work/r" --append -- /bin/true >"$work/f.txt" 2>&1 || rc=$?
[ $rc = 0 ] || fail "plateau run beside a FIFO: exit $rc (124 = hung)"
grep -q "666.0.pltrace: a FIFO, not a regular file" "$work/f.txt" || fail "FIFO not named"

echo ok
