#!/bin/bash
# Integration (issue 17, workers): validation workers judged generation against generation, on a real PyTorch
# script (tests/targets/torch_valgen.py: 80 steps, a 2-worker validation loader every 10 steps = 8 generations).
# --leak: each pass's workers cache 1 MiB more each: the run verdict is a LEAK of the generations (not of the
# trainer), +2 MiB per generation, shown in full in text and HTML. Healthy: no leak, the generations folded into one
# text line and one collapsed HTML section. Both runs' trainers do not leak. ~20 s.
# Usage: test_valgen.sh PLATEAU SCRIPT
set -u
P=$1 script=$2
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$py" -c 'import torch' 2>/dev/null || fail "$py cannot import torch (Debian's python3-torch; make deps installs it)"

"$P" run -o "$tmp/leak" --no-report -- "$py" "$script" --leak >"$tmp/leak.out" 2>&1 || { cat "$tmp/leak.out"; fail "leak run failed"; }
"$P" report "$tmp/leak" --html "$tmp/leak.html" --json "$tmp/leak.json" >"$tmp/leak.txt" 2>"$tmp/leak.err" ||
    fail "report of the leak run exited $?"
head -1 "$tmp/leak.txt" | grep -Eq '^verdict: LEAK in pid [0-9]+ \(16 workers in 8 generations of 2\): \+[0-9.]+ KiB/step of heap.bytes$' ||
    { cat "$tmp/leak.txt"; fail "leak run: the verdict does not name the generations"; }
grep -Eq 'in 8 generations \(2 each, started every ~10 steps\): each generation holds more live heap than the last, \+(1\.9|2\.0|2\.1)[0-9] MiB per generation' "$tmp/leak.txt" ||
    { cat "$tmp/leak.txt"; fail "leak run: no per-generation finding of ~2 MiB"; }
grep -q '^generations: ' "$tmp/leak.txt" && fail "leak run: the leaking generations were folded"
"$py" - "$tmp/leak.json" <<'PY' || fail "leak run: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
rows = {p["role"]: p for p in d["processes"]}
g = rows["generations"]
assert g["generations"] == 8 and g["generation_workers"] == 16 and g["generation_every_steps"] == 10, g
assert g["verdict"]["kind"] == "leak", g["verdict"]
assert rows["main"]["verdict"]["kind"] != "leak", rows["main"]["verdict"]
PY
grep -q '<details class="generations">' "$tmp/leak.html" && fail "leak run: HTML collapses the leaking generations"
grep -q '<h2>Process [0-9]* 16 workers in 8 generations of 2</h2>' "$tmp/leak.html" || fail "leak run: HTML lacks the generations"
grep -q '<details class="workers"><summary>workers (16 processes that never step' "$tmp/leak.html" ||
    fail "leak run: HTML does not collapse the quiet workers"

"$P" run -o "$tmp/ok" --no-report -- "$py" "$script" >"$tmp/ok.out" 2>&1 || { cat "$tmp/ok.out"; fail "healthy run failed"; }
"$P" report "$tmp/ok" --html "$tmp/ok.html" >"$tmp/ok.txt" 2>"$tmp/ok.err" || fail "report of the healthy run exited $?"
head -1 "$tmp/ok.txt" | grep -q '^verdict: no leak' || { cat "$tmp/ok.txt"; fail "healthy run: not 'no leak'"; }
grep -Eq '^generations: 16 workers of pid [0-9]+ in 8 generations \(2 each, started every ~10 steps\): flat from one generation to the next' "$tmp/ok.txt" ||
    { cat "$tmp/ok.txt"; fail "healthy run: the generations are not one flat line"; }
grep -q 'workers in 8 generations of 2$' "$tmp/ok.txt" && fail "healthy run: the generations are shown in full"
grep -q '<details class="generations"><summary>generations: 16 workers of pid' "$tmp/ok.html" ||
    fail "healthy run: HTML does not collapse the generations"
echo "ok: $(head -1 "$tmp/leak.txt"); $(head -1 "$tmp/ok.txt")"
