#!/bin/bash
# Integration: plateau judge on the logs users already have (tests/fixtures/logs): seed 003's production log typed in
# from the write-up (run 2: a plateau after a ~80-step warmup; run 1, stopped at step 70: never a leak; both in one
# file: a restart makes two runs), Lightning's CSVLogger metrics.csv (healthy), nvidia-smi's CSV (a leak, exit 3
# under --fail-on-leak), a logger's JSON lines (allocated leaks, reserved plateaus); empty, binary and missing
# inputs give one line and exit 1; --json writes valid JSON.
# usage: test_judge.sh PLATEAU FIXTURES_DIR WORKDIR
set -u
P=$1 F=$2 work=$3/judge-$$
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$work/out" >&2; exit 1; }
judge() { "$P" judge "$@" >"$work/out" 2>&1; echo $?; }

rc=$(judge "$F/seed003_run2.txt" --fail-on-leak)
[ "$rc" = 0 ] || fail "seed003 run 2: exit $rc"
grep -q '^verdict: no leak (warmup 80 steps, then flat)' "$work/out" || fail "seed003 run 2: not a plateau"
grep -q "'memory' judged as rss (a guess" "$work/out" || fail "seed003 run 2: the guess is not said"

rc=$(judge "$F/seed003_run1.txt" --fail-on-leak)
[ "$rc" = 0 ] || fail "seed003 run 1: exit $rc"
grep -q 'LEAK\| leak ' "$work/out" && fail "seed003 run 1 (stopped at step 70, still warming up) called a leak"
grep -q '^verdict: not decided yet: run ~80 more steps' "$work/out" || fail "seed003 run 1: not 'not decided yet'"

rc=$(judge "$F/seed003_both.txt")
[ "$rc" = 0 ] || fail "seed003 both: exit $rc"
grep -q '2 runs (a step went back: a restart)' "$work/out" || fail "seed003 both: the restart is not a new run"
grep -q '^process 2 run 2 (lines 12-35, steps 10-240)' "$work/out" || fail "seed003 both: run 2's lines"

rc=$(judge "$F/lightning_metrics.csv" --fail-on-leak)
[ "$rc" = 0 ] || fail "lightning: exit $rc"
grep -q "^plateau judge: .*: CSV, 1 run, steps from 'step'; 'gpu_mem_mb' judged as dev.reserved$" "$work/out" ||
    fail "lightning: columns"
grep -q '^verdict: no leak (warmup 40 steps, then flat)' "$work/out" || fail "lightning: not a plateau"

rc=$(judge "$F/nvidia_smi.csv" --fail-on-leak --capacity 80GiB)
[ "$rc" = 3 ] || fail "nvidia-smi: exit $rc, not 3"
grep -q "steps from the order of the rows; 'memory.used \[MiB\]' judged as dev.reserved" "$work/out" ||
    fail "nvidia-smi: columns"
grep -q '^verdict: LEAK .*+12.0 MiB/step of dev.reserved, OOM in' "$work/out" || fail "nvidia-smi: the leak"

rc=$(judge "$F/history.jsonl" --json "$work/h.json")
[ "$rc" = 0 ] || fail "jsonl: exit $rc"
grep -q '^verdict: LEAK .*of dev.allocated' "$work/out" || fail "jsonl: the allocated leak"
grep -q 'dev.reserved .* plateau ' "$work/out" || fail "jsonl: reserved is a plateau"
python3 -m json.tool "$work/h.json" >/dev/null || fail "jsonl: --json is not JSON"
rc=$(judge "$F/history.jsonl" --column memory/reserved_mb --fail-on-leak)
[ "$rc" = 0 ] || fail "--column: exit $rc"
grep -q 'dev.allocated' "$work/out" && fail "--column: another column judged"

# --unit is for values that name no unit: it never rescales a unit a cell or header gives (history.jsonl's "_mb")
rc=$(judge "$F/history.jsonl" --unit GB)
grep -q '^verdict: LEAK .*+3.82 MiB/step of dev.allocated' "$work/out" || fail "--unit rescaled values with a unit"
{ echo "step,rss"; for i in $(seq 1 200); do echo "$i,$((1000 + (i < 30 ? i * 10 : 300)))"; done; } >"$work/bare.csv"
rc=$(judge "$work/bare.csv" --unit MiB)
grep -q "rss .* plateau .*warmup.*(+2[0-9][0-9] MiB)" "$work/out" || fail "--unit MiB on unitless values"
# a log past the first read buffer (64 KiB): read whole, every line judged
{ echo "step,rss"; for i in $(seq 1 15000); do echo "$i,$((1000 + (i < 30 ? i * 10 : 300)))"; done; } >"$work/long.csv"
[ "$(stat -c %s "$work/long.csv")" -gt 131072 ] || fail "long.csv is not past two buffers"
rc=$(judge "$work/long.csv" --unit MiB)
[ "$rc" = 0 ] || fail "long log: exit $rc"
grep -q '^process 1 run 1 (lines 2-15001, steps 1-15000)' "$work/out" || fail "long log: not read whole"

: >"$work/empty.txt"
head -c 4096 /dev/urandom >"$work/junk.bin"
for bad in "$work/empty.txt" "$work/junk.bin" "$work/missing.txt" "$work"; do
    rc=$(judge "$bad")
    [ "$rc" = 1 ] || fail "$bad: exit $rc, not 1"
    [ "$(wc -l <"$work/out")" = 1 ] || fail "$bad: not one line"
done
rc=$(judge "$F/history.jsonl" --as nothing)
[ "$rc" = 2 ] || fail "--as nothing: exit $rc, not 2"
echo ok
