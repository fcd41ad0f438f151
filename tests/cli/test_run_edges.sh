#!/bin/sh
# plateau run's rough edges.
# - A command that cannot be run (/nonexistent/cmd) exits 127 (126: not executable) and leaves no run behind: the
#   directory plateau run made is removed, an empty one of yours is left empty, an --append'ed run keeps its run id;
#   a program that runs and exits 127 itself keeps its run.
# - plateau run records the --host-allocator it was asked for (the run-id file), and `plateau report RUN_A RUN_B`
#   uses it when the tracer cannot name the allocator: a jemalloc under another file name (PLATEAU_JEMALLOC) is
#   recorded as other:NAME, and the comparison said "host allocator unknown (recorded)".
# - A run still in progress is reported as "still running" (the pid exists, is not a zombie, and started no later
#   than its trace), not "ended by a signal ... or still running"; once killed, it is "killed by signal 9".
# usage: test_run_edges.sh PLATEAU TARGETS_DIR WORKDIR
set -eu
P=$(realpath "$1") T=$(realpath "$2") work=$3/run-edges-$$
rm -rf "$work"; mkdir -p "$work"; chmod 700 "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.txt; do echo "== $f"; cat "$f"; done >&2; exit 1; }

# --- a command that cannot be run leaves no run directory ---
mkdir "$work/cwd"
rc=0; (cd "$work/cwd" && "$P" run -- /nonexistent/cmd) >"$work/ne.txt" 2>&1 || rc=$?
[ "$rc" = 127 ] || fail "plateau run -- /nonexistent/cmd exits $rc, not 127"
grep -q "cannot run '/nonexistent/cmd'" "$work/ne.txt" || fail "no 'cannot run' line"
[ -z "$(ls -A "$work/cwd")" ] || fail "a run directory was left behind: $(ls -A "$work/cwd")"
rc=0; "$P" run -o "$work/new" -- /nonexistent/cmd >"$work/ne2.txt" 2>&1 || rc=$?
[ "$rc" = 127 ] && [ ! -e "$work/new" ] || fail "-o new: exit $rc, directory left: $(ls -d "$work/new" 2>&1)"
: >"$work/notexec"; chmod 644 "$work/notexec"
rc=0; "$P" run -o "$work/new2" -- "$work/notexec" >"$work/ne3.txt" 2>&1 || rc=$?
[ "$rc" = 126 ] && [ ! -e "$work/new2" ] || fail "not executable: exit $rc, directory left: $(ls -d "$work/new2" 2>&1)"
mkdir -m 700 "$work/mine"
rc=0; "$P" run -o "$work/mine" -- /nonexistent/cmd >"$work/ne4.txt" 2>&1 || rc=$?
[ "$rc" = 127 ] && [ -d "$work/mine" ] && [ -z "$(ls -A "$work/mine")" ] ||
    fail "an empty directory of mine: exit $rc, now holds: $(ls -A "$work/mine")"
"$P" run -o "$work/app" --no-report -- "$T/target_leak" 3 >"$work/app.txt" 2>&1 || fail "leak run"
id=$(cat "$work/app/plateau-run-id")
rc=0; "$P" run -o "$work/app" --append -- /nonexistent/cmd >"$work/ne5.txt" 2>&1 || rc=$?
[ "$rc" = 127 ] && [ "$(cat "$work/app/plateau-run-id")" = "$id" ] || fail "--append: exit $rc, run id lost"
ls "$work/app/"*.pltrace >/dev/null 2>&1 || fail "--append: the earlier traces are gone"
# a program that exits 127 by itself ran: its run stays
rc=0; "$P" run -o "$work/ran" --no-report -- sh -c 'exit 127' >"$work/ran.txt" 2>&1 || rc=$?
[ "$rc" = 127 ] && [ -f "$work/ran/plateau-run-id" ] || fail "a program exiting 127 lost its run (exit $rc)"

# --- the host allocator plateau run was asked for is recorded and used ---
je=${PL_JEMALLOC_PATH:-} # the build's (config.h PL_JEMALLOC_PATH), from tests/cli/meson.build
[ -n "$je" ] && [ -f "$je" ] || fail "libjemalloc.so.2 not found (libjemalloc-dev is in the Makefile's PKGS)"
cp "$je" "$work/libmymalloc.so.2"
"$P" run -o "$work/ha-glibc" --no-report -- "$T/target_leak" 40 >"$work/ha-g.txt" 2>&1 || fail "glibc run"
PLATEAU_JEMALLOC="$work/libmymalloc.so.2" "$P" run -o "$work/ha-je" --no-report --host-allocator jemalloc -- \
    "$T/target_leak" 40 >"$work/ha-j.txt" 2>&1 || fail "jemalloc run"
grep -qx 'host-allocator jemalloc' "$work/ha-je/plateau-run-id" || fail "the run-id file does not record jemalloc"
grep -qx 'host-allocator glibc' "$work/ha-glibc/plateau-run-id" || fail "the run-id file does not record glibc"
"$P" report "$work/ha-glibc" "$work/ha-je" --json "$work/ha.json" >"$work/ha.txt" 2>&1 || fail "report RUN_A RUN_B"
grep -q 'host allocator glibc (recorded)' "$work/ha.txt" || fail "glibc run's allocator"
grep -q 'host allocator jemalloc (requested)' "$work/ha.txt" || fail "jemalloc run's allocator not used"
grep -q 'host allocator unknown' "$work/ha.txt" && fail "an allocator is unknown"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"]; assert [(x["allocator"], x["allocator_from"]) for x in r] == [("glibc", "recorded"), ("jemalloc", "requested")], r' \
    "$work/ha.json" || fail "JSON allocators"

# --- a run still in progress is "still running"; killed, it is not ---
"$P" run -o "$work/live" --no-report -- "$T/target_spin" 20 >"$work/live.txt" 2>&1 &
runpid=$!
i=0
until grep -q ready "$work/live.txt" 2>/dev/null && "$P" report "$work/live" >"$work/live-report.txt" 2>&1; do
    i=$((i + 1)); [ "$i" -lt 300 ] || { kill "$runpid"; fail "the spinning run never became reportable"; }
    sleep 0.1
done
spin=$(basename "$(ls "$work/live/"*.pltrace | head -n1)" .0.pltrace)
grep -q "pid $spin is still running" "$work/live-report.txt" || { kill -9 "$spin"; fail "a live run not said running"; }
grep -qE "killed by signal|ended by a signal" "$work/live-report.txt" && { kill -9 "$spin"; fail "a live run said killed"; }
grep -q "\[running\]" "$work/live-report.txt" || true # the process table only shows with several processes
kill -9 "$spin"
wait "$runpid" || true
"$P" report "$work/live" >"$work/dead-report.txt" 2>&1 || fail "report of the killed run"
grep -q "is still running" "$work/dead-report.txt" && fail "a killed run said running"
grep -q "killed by signal 9 (SIGKILL" "$work/dead-report.txt" || fail "a killed run not said killed"
echo "ok: plateau run rough edges"
