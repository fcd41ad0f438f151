#!/bin/bash
# Integration: the CI gate and the live verdict, on tests/targets/warmleak.c (a warmup, then a
# leak or a plateau; hand-off files let the test see each phase while the program runs, with no timing).
#  1. plateau watch follows a run in progress: "warming up" during the warmup, then LEAK while the program still runs;
#     started before the run's directory exists, it waits for it (one line), then follows the run to its end.
#  2. --fail-on-leak: plateau run and plateau report exit 3 on the leaking run, 0 on the plateau; the report is
#     printed either way.
#  3. --stop-on-leak past a declared warmup: the leaking program is stopped (SIGTERM; plateau run exits 3) long before
#     its end, with run.stopped; the plateauing one, and a leak whose OOM is beyond --run-steps, run to the end.
# Timeouts are hang guards only. Usage: test_live.sh PLATEAU TARGETS_DIR
set -u
P=$1
W=$2/target_warmleak
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- 1. plateau watch on a run in progress ---
d=$tmp/watch
mkdir "$d"  # plateau run -o takes an existing directory; watch needs it to exist
timeout 150 "$P" run --no-report --no-live -o "$d" -- "$W" 30 400 "$tmp/go" "$tmp/end" >/dev/null 2>&1 &
runpid=$!
state=0
while IFS= read -r line; do
  echo "watch: $line"
  case $state in
  0) if [[ $line == *"heap: warming up"* ]]; then
       [[ $line == *"heap: LEAK"* || $line == *"run ended"* ]] && fail "warming up and LEAK/ended at once"
       state=1; touch "$tmp/go"
     elif [[ $line == *"heap: LEAK"* ]]; then fail "LEAK during the warmup: $line"; fi ;;
  1) if [[ $line == *"heap: LEAK"* ]]; then
       [[ $line == *"run ended"* ]] && fail "LEAK seen only after the program ended"
       [[ $line == *"OOM in ~"* ]] || fail "no projected OOM: $line"
       state=2; touch "$tmp/end"
     fi ;;
  esac
done < <(timeout 120 "$P" watch --interval 0.2 "$d")
[ $state = 2 ] || fail "watch never went from warming up to LEAK (state $state)"
wait $runpid || fail "the watched run failed"
"$P" watch --once "$d" | grep -q "run ended" || fail "watch --once on an ended run does not say so"

# plateau watch on a directory that does not exist yet: one line says it waits, then it follows the run to its end
w=$tmp/later
timeout 120 "$P" watch --interval 0.1 "$w" >"$tmp/later.out" 2>"$tmp/later.err" &
wpid=$!
for _ in $(seq 1 300); do grep -q "waiting" "$tmp/later.err" && break; sleep 0.1; done  # hang guard, not a timing
grep -q "^plateau watch: $w does not exist yet: waiting for it" "$tmp/later.err" || { cat "$tmp/later.err"; fail "watch on a missing directory does not wait"; }
timeout 120 "$P" run --no-report --no-live -o "$w" -- "$W" 30 60 - - >/dev/null 2>&1 || fail "the later run failed"
wait $wpid || fail "watch of the later run exited $?"
grep -q "run ended" "$tmp/later.out" || { cat "$tmp/later.out" "$tmp/later.err"; fail "watch did not follow the later run"; }
[ "$(grep -c waiting "$tmp/later.err")" = 1 ] || fail "more than one waiting line"

# plateau run --live on a non-terminal: status lines on stderr (a line per change), none on stdout
"$P" run --live --live-interval 0.2 --no-report -o "$tmp/livelines" -- "$W" 30 300 - - >"$tmp/ll.out" 2>"$tmp/ll.err" \
  || fail "run --live failed"
grep -q "^plateau: pid [0-9]* target_warmleak .*heap: " "$tmp/ll.err" || { cat "$tmp/ll.err"; fail "no live status line"; }
grep -q "heap: " "$tmp/ll.out" && fail "the live status went to stdout"
"$P" run --no-live --no-report -o "$tmp/nolive" -- "$W" 30 100 - - 2>&1 | grep -q "heap: " && fail "--no-live printed a status"

# --- 2. --fail-on-leak ---
"$P" run --no-live --fail-on-leak -o "$tmp/leak" -- "$W" 30 300 - - >"$tmp/leak.txt" 2>&1
rc=$?
[ $rc -eq 3 ] || { cat "$tmp/leak.txt"; fail "run --fail-on-leak on a leak: exit $rc, not 3"; }
grep -q "^verdict: LEAK" "$tmp/leak.txt" || fail "the leaking run's report is not printed"
"$P" run --no-live --fail-on-leak -o "$tmp/flat" -- "$W" 30 300 - - 0 >"$tmp/flat.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/flat.txt"; fail "run --fail-on-leak on a plateau: exit $rc, not 0"; }
grep -q "^verdict: no leak" "$tmp/flat.txt" || fail "the plateau's report is not printed"
"$P" run --no-live -o "$tmp/leak-plain" -- "$W" 30 300 - - >/dev/null 2>&1 || fail "without --fail-on-leak a leak is not an error"
"$P" report --fail-on-leak "$tmp/leak" >"$tmp/r.txt"; rc=$?
[ $rc -eq 3 ] || fail "report --fail-on-leak on a leak: exit $rc"
grep -q "^verdict: LEAK" "$tmp/r.txt" || fail "report --fail-on-leak prints no report"
"$P" report --fail-on-leak "$tmp/flat" >/dev/null || fail "report --fail-on-leak on a plateau: exit $?"
"$P" run --no-live --no-report --fail-on-leak -o "$tmp/leak-quiet" -- "$W" 30 300 - - >"$tmp/q.txt" 2>&1
[ $? -eq 3 ] || fail "--no-report --fail-on-leak does not judge the run"
grep -q "^verdict" "$tmp/q.txt" && fail "--no-report printed the report"

# --- 3. --stop-on-leak (the warmup declared: --warmup-steps 30, so the leak after it is evidence enough) ---
"$P" run --no-live --stop-on-leak --warmup-steps 30 --live-interval 0.2 -o "$tmp/stop" -- "$W" 30 5000 - - \
  >"$tmp/stop.txt" 2>&1
rc=$?
cat "$tmp/stop.txt"
[ $rc -eq 3 ] || fail "stop-on-leak: exit $rc, not 3 (stopped on a leak)"
[ -f "$tmp/stop/run.stopped" ] || fail "no run.stopped"
grep -q "stopping pid [0-9]* (target_warmleak)" "$tmp/stop.txt" || fail "the stop is not announced"
grep -q "the command returned 143" "$tmp/stop.txt" || fail "the command's own status is not said"
grep -q "^verdict: LEAK" "$tmp/stop.txt" || fail "the stopped run's report is not LEAK"
"$P" run --no-live --stop-on-leak --warmup-steps 30 --fail-on-leak --live-interval 0.2 -o "$tmp/stop2" -- \
  "$W" 30 5000 - - >/dev/null 2>&1
rc=$?
[ $rc -eq 3 ] || fail "stop-on-leak + fail-on-leak: exit $rc, not 3"
"$P" run --no-live --stop-on-leak --warmup-steps 30 --live-interval 0.2 -o "$tmp/nostop" -- "$W" 30 400 - - 0 \
  >/dev/null 2>&1 || fail "a plateau under --stop-on-leak did not run to its end (exit $?)"
[ -f "$tmp/nostop/run.stopped" ] && fail "a plateau was stopped"
# 64 KiB/step reaches the host memory after far more than 1000 steps: no OOM before the run would end
"$P" run --no-live --stop-on-leak --warmup-steps 30 --run-steps 1000 --live-interval 0.2 -o "$tmp/late" -- "$W" 30 600 - - \
  >/dev/null 2>&1 || fail "a leak whose OOM is beyond --run-steps was stopped (exit $?)"
[ -f "$tmp/late/run.stopped" ] && fail "run.stopped for a leak beyond --run-steps"
echo "ok: watch warming up -> LEAK while running; --fail-on-leak 3/0; --stop-on-leak stops only a leak that would OOM"
