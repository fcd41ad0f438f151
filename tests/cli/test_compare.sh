#!/bin/sh
# Integration: `plateau report RUN_A RUN_B` on the same program run under --host-allocator glibc and jemalloc.
# A real leak (target_leak) must be concluded a leak under both allocators, with each run's allocator read from its
# trace (recorded there by the tracer, trace format 1.2); a warmup plateau (target_plateau) must never be called a leak or allocator retention; bad arguments exit 2.
# usage: test_compare.sh PLATEAU TARGETS_DIR
set -eu
P=$1
T=$2
tmp=$(mktemp -d /tmp/pl-test-compare-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$P" run --no-report -o "$tmp/leak-glibc" -- "$T/target_leak" 200 >/dev/null 2>&1 || fail "run leak glibc"
"$P" run --no-report --host-allocator jemalloc -o "$tmp/leak-je" -- "$T/target_leak" 200 >/dev/null 2>&1 ||
    fail "run leak jemalloc"
"$P" report "$tmp/leak-glibc" "$tmp/leak-je" --json "$tmp/leak.json" >"$tmp/leak.txt" || fail "report leak"
cat "$tmp/leak.txt"
python3 - "$tmp/leak.json" <<'PY' || fail "leak comparison"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["schema"] == "plateau.compare" and c["schema_version"] == 1, c
assert [r["allocator"] for r in c["runs"]] == ["glibc", "jemalloc"], c["runs"]
assert [r["allocator_from"] for r in c["runs"]] == ["recorded", "recorded"], c["runs"]
assert c["conclusion"]["code"] == "leak", c["conclusion"]
assert all(r["heap"] == "grows" for r in c["runs"]), c["runs"]
PY
grep -q "real leak" "$tmp/leak.txt" || fail "no 'real leak' sentence"

"$P" run --no-report -o "$tmp/pl-glibc" -- "$T/target_plateau" 40 10 >/dev/null 2>&1 || fail "run plateau glibc"
"$P" run --no-report --host-allocator jemalloc -o "$tmp/pl-je" -- "$T/target_plateau" 40 10 >/dev/null 2>&1 ||
    fail "run plateau jemalloc"
# short traces (too few samples to guess from usable sizes): the recorded allocator is still known
"$P" report "$tmp/pl-je" "$tmp/pl-glibc" | grep -q "host allocator jemalloc (recorded)" || fail "allocator not recorded"
"$P" report "$tmp/pl-je" "$tmp/pl-glibc" --allocators jemalloc,glibc --json "$tmp/pl.json" || fail "report plateau"
python3 - "$tmp/pl.json" <<'PY' || fail "plateau comparison"
import json, sys
c = json.load(open(sys.argv[1]))
assert [r["allocator"] for r in c["runs"]] == ["jemalloc", "glibc"], c["runs"]
assert c["conclusion"]["code"] in ("no-growth", "inconclusive"), c["conclusion"]
PY

# arguments: the allocators given on the command line win; bad ones and --html exit 2
"$P" report "$tmp/leak-glibc" "$tmp/leak-je" --allocators jemalloc,glibc | grep -q "host allocator jemalloc (given)" ||
    fail "--allocators not used"
set +e
"$P" report "$tmp/leak-glibc" "$tmp/leak-je" --allocators tcmalloc,glibc >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --allocators"
"$P" report "$tmp/leak-glibc" "$tmp/leak-je" --html "$tmp/x.html" >/dev/null 2>&1; [ $? -eq 2 ] || fail "--html"
"$P" report "$tmp/leak-glibc" --allocators glibc,jemalloc >/dev/null 2>&1; [ $? -eq 2 ] || fail "one run + --allocators"
"$P" report "$tmp/leak-glibc" "$tmp/nonexistent" >/dev/null 2>&1; [ $? -eq 1 ] || fail "missing run"
set -e
echo "ok: leak under both allocators; plateau neither leak nor retention; arguments"
