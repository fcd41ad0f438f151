#!/bin/bash
# Integration: plateau report --between A B on a leak that starts mid-run (tests/targets/lateleak.c: 60 flat steps,
# then 60 steps each keeping 256 KiB from leak_later()), run under plateau run with every allocation's stack recorded
# (PLATEAU_SAMPLE_BYTES=0): the window after the onset names leak_later with about 30 x 256 KiB of growth, the window
# before it names no site and its live heap did not grow; text, JSON and HTML. Bad windows: A >= B and words are
# refused (exit 2, one line), a window after the run's end and a run without steps say so in one line (exit 1), a
# window past the end is measured to the last step (said).
# Usage: test_between.sh PLATEAU TARGETS_DIR
set -u
P=$1
T=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

PLATEAU_SAMPLE_BYTES=0 "$P" run --no-report --no-live -o "$tmp/late" -- "$T/target_lateleak" 60 60 262144 \
  >/dev/null 2>&1 || fail "plateau run"

# --- after the onset: leak_later, first, ~30 x 256 KiB ---
"$P" report --between 80 110 "$tmp/late" --json "$tmp/after.json" --html "$tmp/after.html" >"$tmp/after.txt" 2>&1 ||
  fail "report --between 80 110: $(cat "$tmp/after.txt")"
cat "$tmp/after.txt"
head -1 "$tmp/after.txt" | grep -q "^what grew between step 80 and step 110" || fail "heading"
grep -q "step 80 -> 110" "$tmp/after.txt" || fail "the process's window"
grep -A1 "^  1\. +" "$tmp/after.txt" | grep -q "leak_later" || fail "leak_later is not the first site"
python3 - "$tmp/after.json" <<'PY' || fail "JSON after"
import json, sys
d = json.load(open(sys.argv[1]))
b = d["between"]
assert b["from_step"] == 80 and b["to_step"] == 110, b
p = [q for q in b["processes"] if q["fit"] == "whole"][0]
top = p["sites"]["top"]
assert top and any("leak_later" in f for f in top[0]["frames"]), top[:1]
g = top[0]["growth_bytes"]
assert abs(g - 30 * 262144) <= 2 * 262144, g
heap = [m for m in p["metrics"] if m["metric"] == "heap.bytes"][0]
assert abs(heap["change"] - 30 * 262144) <= 3 * 262144, heap
PY
grep -q "What grew between step 80 and step 110" "$tmp/after.html" || fail "HTML section"
grep -q "leak_later" "$tmp/after.html" || fail "HTML site"

# --- before the onset: nothing grew ---
"$P" report --between 10 50 "$tmp/late" --json "$tmp/before.json" >"$tmp/before.txt" 2>&1 || fail "report 10 50"
cat "$tmp/before.txt"
grep -q "leak_later" "$tmp/before.txt" && fail "leak_later named before the leak started"
grep -q "no call site's live bytes grew between step 10 and step 50" "$tmp/before.txt" || fail "no-growth line"
python3 - "$tmp/before.json" <<'PY' || fail "JSON before"
import json, sys
d = json.load(open(sys.argv[1]))
p = [q for q in d["between"]["processes"] if q["fit"] == "whole"][0]
heap = [m for m in p["metrics"] if m["metric"] == "heap.bytes"][0]
assert abs(heap["change"]) < 262144, heap
assert all(not any("leak_later" in f for f in s["frames"]) for s in p["sites"]["top"]), p["sites"]
PY

# --- two words or one: A..B ---
"$P" report --between 80..110 "$tmp/late" >"$tmp/dots.txt" 2>&1 || fail "A..B"
"$P" report "$tmp/late" --between 80 110 >"$tmp/words.txt" 2>&1 || fail "RUN --between A B"
cmp -s "$tmp/words.txt" "$tmp/dots.txt" || fail "--between 80..110 differs from --between 80 110"
grep -q "leak_later" "$tmp/words.txt" || fail "RUN --between A B: no leak_later"

# --- bad windows ---
check_bad() { # expected status, expected words, args...
  local want=$1 words=$2
  shift 2
  "$P" report "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
  local rc=$?
  echo "report $*: exit $rc: $(cat "$tmp/bad.err")"
  [ $rc -eq "$want" ] || fail "report $*: exit $rc, not $want"
  [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] || fail "report $*: not one line: $(cat "$tmp/bad.err")"
  grep -q "$words" "$tmp/bad.err" || fail "report $*: '$words' not said"
  [ -s "$tmp/bad.out" ] && fail "report $*: printed a report"
  return 0
}
check_bad 2 "must come before" --between 110 80 "$tmp/late"
check_bad 2 "must come before" --between 80 80 "$tmp/late"
check_bad 2 "wants two step numbers" --between eighty 110 "$tmp/late"
check_bad 1 "ended before step 501 (the last completed step: 120)" --between 500 600 "$tmp/late"
"$P" report --between 100 1000 "$tmp/late" >"$tmp/past.txt" 2>&1 || fail "a window past the end"
grep -q "step 100 -> 120 (its last step: it ended inside the window)" "$tmp/past.txt" || fail "past the end not said"

"$P" run --no-report --no-live -o "$tmp/nosteps" -- "$T/target_aslimit" 8 >/dev/null 2>&1
check_bad 1 "no process of the run recorded steps" --between 1 2 "$tmp/nosteps"
echo "ok: --between names the late leak after its onset only; bad windows said in one line"
