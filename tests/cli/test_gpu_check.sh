#!/bin/bash
# Integration: the GPU check (tools/gpu-check.sh, docs/gpu-check.md) over the CUDA driver double, as CI runs it.
# The table has its six steps in order, each PASS, FAIL or SKIP with a reason; what runs over the double (step 1:
# the allocator's cuda backend; step 3: the driver hooks with the stand-in runtime and the dev.* verdicts) PASSes;
# what needs a GPU (steps 2, 4, 5, 6) SKIPs saying so. Then step 3 again with a 0.05 s limit: it FAILs as timed
# out and the steps after it still run (a failing step never stops the others), and the exit status is 1.
# Usage: test_gpu_check.sh GPU_CHECK_SH BUILD_DIR
set -u
G=$1 B=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$G" --mode double --tree "$B" --out "$tmp/all" > "$tmp/all.txt" 2>&1
rc=$?
cat "$tmp/all.txt"
[ $rc -eq 0 ] || fail "gpu-check exited $rc"
python3 - "$tmp/all/table.tsv" <<'PY' || fail "table"
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
assert rows[0] == ["step", "check", "status", "seconds", "detail"], rows[0]
rows = rows[1:]
assert [r[0] for r in rows] == ["1", "2", "3", "4", "5", "6"], [r[0] for r in rows]
for r in rows:
    assert len(r) == 5 and r[1], r
    assert r[2] in ("PASS", "FAIL", "SKIP"), r
    float(r[3])
    assert len(r[4]) > 20, ("every status has its reason or numbers", r)
st = {r[0]: r for r in rows}
for n in "13":
    assert st[n][2] == "PASS", ("runs over the double", st[n])
for n in "2456":
    assert st[n][2] == "SKIP" and st[n][4].startswith("GPU-only: "), ("needs a GPU", st[n])
assert "the CUDA runtime cannot start on the driver double" in st["2"][4], st["2"]
assert "cudaGetDeviceCount" in st["2"][4], ("the runtime's own failure is named", st["2"])
assert "driver-only tests 4/4 OK" in st["1"][4], st["1"]
assert "hooks recorded" in st["3"][4] and "leak: dev." in st["3"][4] and "healthy: " in st["3"][4], st["3"]
print("table ok:", *("%s %s" % (r[0], r[2]) for r in rows))
PY
[ "$(wc -l < "$tmp/all/table.txt")" -eq 6 ] || fail "table.txt has not 6 lines"
for n in 1 2 3 4 5 6; do [ -s "$tmp/all/step$n/log" ] || [ -s "$tmp/all/step$n/result" ] || fail "step$n left nothing"; done
ls "$tmp/all/step3/leak.json" "$tmp/all/step3/healthy.json" "$tmp/all/step1/driver.log" > /dev/null || fail "outputs"

# a step that runs out of time FAILs, and the others still run (step 3 cannot end within 0.05 s: its first program
# alone sleeps 60 ms holding device memory)
GPU_CHECK_LIMIT_3=0.05 "$G" --mode double --tree "$B" --out "$tmp/slow" --steps 3,4 > "$tmp/slow.txt" 2>&1
rc=$?
cat "$tmp/slow.txt"
[ $rc -eq 1 ] || fail "a failed step did not make the exit status 1 (got $rc)"
grep -P '^3\t[^\t]*\tFAIL\t[0-9.]+\ttimed out after 0.05 s' "$tmp/slow/table.tsv" > /dev/null || fail "step 3 not timed out"
grep -P '^4\t[^\t]*\tSKIP\t' "$tmp/slow/table.tsv" > /dev/null || fail "step 4 did not run after step 3 failed"
echo "ok: gpu-check over the driver double"
