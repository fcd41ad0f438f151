#!/bin/sh
# Integration: plateau report's exports (--csv, --trace-events, --torch-snapshot) and plateau_mark() in every
# output, each read back by its consumer's own parser: Python's csv, json and pickle, PyTorch's memory_viz
# (Debian's torch, when installed) and plateau tune (our snapshot reader). From a fresh `plateau run` of
# target_marks (marks and device events from plateau's allocator on the sim backend) and from the committed
# fixture traces; and, with the CUDA driver double, from target_cuda (runtime and driver hooks: each allocation a
# segment of its own, one record per call). A run without device events: one line, exit 1, no file. Two outputs on
# stdout: exit 2.
# usage: test_exports.sh PLATEAU TARGETS_DIR FIXTURES_DIR [CUDA_DOUBLE_PATH]
set -eu
P=$1
T=$2
F=$3
DOUBLE=${4:-}
tmp=$(mktemp -d /tmp/pl-test-exports-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

"$P" run --no-report -o "$tmp/run" -- "$T/target_marks" 12 >/dev/null 2>&1 || fail "run target_marks"
"$P" report "$tmp/run" --json "$tmp/r.json" --html "$tmp/r.html" --csv "$tmp/r.csv" --trace-events "$tmp/r.trace.json" \
    --torch-snapshot "$tmp/r.pickle" >"$tmp/r.txt" || fail "report with every export"
cat "$tmp/r.txt"
grep -q '^  marks: step 1 start, step 4 eval, "every 4", step 6 Z*\\xc3, step 8 eval' "$tmp/r.txt" ||
    fail "text: no marks line (or the cut label is not escaped)"
grep -q '<title>mark eval, &quot;every 4&quot;</title>' "$tmp/r.html" || fail "html: no mark line on the charts"
$PY -c 'import sys; open(sys.argv[1], encoding="utf-8").read()' "$tmp/r.html" || fail "html: not UTF-8 (the cut label)"
$PY - "$tmp" <<'PY' || fail "exports do not read back"
import csv, json, pickle, sys
d = sys.argv[1]
rep = json.load(open(f"{d}/r.json"))
(proc,) = [p for p in rep["processes"] if p["name"] == "target_marks"]
labels = ["start", 'eval, "every 4"', "Z" * 62 + "\ufffd", 'eval, "every 4"', 'eval, "every 4"']
# JSON: every mark, in order, with the step it fell in (the cut UTF-8 byte is escaped by the JSON writer)
marks = [(m["step"], m["label"]) for m in proc["marks"]]
assert [s for s, _ in marks] == [1, 4, 6, 8, 12], marks
assert [l for _, l in marks] == labels, marks
series = {m["name"]: {s: b for s, b, _ in m["series"]} for m in proc["metrics"]}
steps = sorted(set().union(*[set(v) for v in series.values()]))

# CSV: one row per step of the process, values equal to the JSON report's series, marks in their step's row
rows = [r for r in csv.DictReader(open(f"{d}/r.csv", newline="", encoding="utf-8")) if r["process"] == "target_marks"]
assert [int(r["step"]) for r in rows] == steps, ([r["step"] for r in rows], steps)
assert all(r["by"] == "step" and r["pid"] == str(proc["pid"]) and r["exec"] == "0" for r in rows)
for name, pts in series.items():
    for r in rows:
        s = int(r["step"])
        if s in pts:
            assert r[name] != "" and abs(float(r[name]) - pts[s]) <= 1e-9 * max(1, abs(pts[s])), (name, s, r[name])
        else:
            assert r[name] == "", (name, s, r[name])
by_step = {int(r["step"]): r["marks"] for r in rows}
assert by_step[1] == "start" and by_step[4] == 'eval, "every 4"' and by_step[12] == 'eval, "every 4"', by_step
assert by_step[6] == "Z" * 62 + "\ufffd", by_step[6]  # the cut character: U+FFFD, the file stays valid UTF-8
assert by_step[2] == "", by_step

# Trace events: counters per metric (one per series point), a step instant per step, every mark, process named
tr = json.load(open(f"{d}/r.trace.json", encoding="utf-8"))
ev = [e for e in tr["traceEvents"] if e["pid"] == proc["pid"]]
for name, pts in series.items():
    c = [e for e in ev if e["ph"] == "C" and e["name"] == name]
    assert len(c) == len(pts), (name, len(c), len(pts))
    assert sorted(list(e["args"].values())[0] for e in c) == sorted(pts.values()), name
inst = [e for e in ev if e["ph"] == "i"]
assert [e["args"]["step"] for e in inst if e["cat"] == "plateau.step"] == steps
mk = [e for e in inst if e["cat"] == "plateau.mark"]
assert [e["name"] for e in mk] == labels, mk
assert [e["args"]["step"] for e in mk] == [1, 4, 6, 8, 12]
assert all(isinstance(e["ts"], (int, float)) and e["ts"] > 1e15 for e in ev if "ts" in e)  # wall clock, in us
meta = {e["name"]: e["args"] for e in ev if e["ph"] == "M"}
assert meta["process_name"]["name"] == f"target_marks (pid {proc['pid']})", meta
assert tr["otherData"]["clock"] == "realtime"

# PyTorch snapshot: 12 kept 256 KiB blocks live at the end, every allocation in the device trace
snap = pickle.load(open(f"{d}/r.pickle", "rb"))
assert set(snap) >= {"segments", "device_traces"}, snap.keys()
(trace,) = snap["device_traces"]
acts = [e["action"] for e in trace]
n = (acts.count("alloc"), acts.count("free_completed"))
assert n == (12 * 5, 12 * 4), n
live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
assert len(live) == 12 and all(b["size"] == 256 << 10 for b in live), live
# frames: where each block was allocated (target_marks's main, native frames: no Python here)
for b in live:
    names = [(f["filename"].split("/")[-1], f["name"]) for f in b["frames"]]
    assert ("target_marks", "main") in names, names
    assert not any("libplateau" in f["filename"] for f in b["frames"]), b["frames"]
assert all(e["frames"] for e in trace if e["action"] == "alloc"), "an alloc entry without frames"
for s in snap["segments"]:
    assert s["total_size"] == sum(b["size"] for b in s["blocks"]), s
    assert s["allocated_size"] == sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated")
try:
    from torch.cuda import _memory_viz as mv
except ImportError as e:
    print(f"memory_viz not checked: {e}")
else:
    st = mv.stats(snap["segments"])  # torch 1.13 takes the segment list; asserts each segment's block sum
    assert st["segments"] == len(snap["segments"]) and st["active_allocated"].value == 12 * (256 << 10), st
    flame = mv.segments(snap["segments"], format_flamegraph=lambda s: s)
    assert flame.count("active_allocated") == 12, flame
    flame = mv.memory(snap["segments"], format_flamegraph=lambda s: s)  # the frames, through 'history'
    assert flame.count("target_marks:0:main") == 12, flame
    print("memory_viz: stats, segments and memory read the snapshot")
PY
"$P" tune "$tmp/r.pickle" >"$tmp/tune.txt" 2>&1 ||
    { cat "$tmp/tune.txt"; fail "plateau tune cannot read the snapshot"; }
grep -q "60 alloc, 0 free_requested, 48 free_completed" "$tmp/tune.txt" || { cat "$tmp/tune.txt"; fail "tune counts"; }

# stdout: '-' for the CSV and the trace events (instead of the text); two on stdout is an error
"$P" report "$tmp/run" --csv - >"$tmp/o.csv" || fail "--csv -"
head -1 "$tmp/o.csv" | grep -q '^pid,exec,rank,process,by,step,t_seconds,' || fail "--csv - is not the CSV"
cmp -s "$tmp/o.csv" "$tmp/r.csv" || fail "--csv - differs from the file"
"$P" report "$tmp/run" --trace-events - | $PY -c 'import json,sys; json.load(sys.stdin)' || fail "--trace-events -"
if "$P" report "$tmp/run" --csv - --json - >/dev/null 2>"$tmp/err"; then fail "two stdout outputs accepted"; fi
grep -q "asks for stdout" "$tmp/err" || fail "two stdout outputs: no message"

# a program that forks and execs: one pid has two images; (pid, exec, step) keys every row
"$P" run --no-report -o "$tmp/fx" -- "$T/target_forkexec" >/dev/null 2>&1 || fail "run target_forkexec"
"$P" report "$tmp/fx" --csv "$tmp/fx.csv" >/dev/null || fail "report forkexec"
$PY - "$tmp/fx.csv" <<'PY' || fail "forkexec rows are not keyed by (pid, exec, step)"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
keys = [(r["pid"], r["exec"], r["step"]) for r in rows]
assert len(keys) == len(set(keys)), keys
assert {r["exec"] for r in rows} == {"0", "1"}, {r["exec"] for r in rows}
PY

# a run without device events: one clear line, exit 1, no file
"$P" run --no-report -o "$tmp/host" -- "$T/target_leak" 20 >/dev/null 2>&1 || fail "run target_leak"
if "$P" report "$tmp/host" --torch-snapshot "$tmp/none.pickle" >/dev/null 2>"$tmp/err"; then
    fail "--torch-snapshot without device events exited 0"
fi
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "no device allocations" "$tmp/err" || { cat "$tmp/err"; fail "message"; }
[ ! -e "$tmp/none.pickle" ] || fail "a snapshot file was written for a run without device events"

# the committed fixture traces
for f in workload frag; do
    "$P" report "$F/traces/$f.pltrace" --json "$tmp/$f.json" --csv "$tmp/$f.csv" --trace-events "$tmp/$f.trace.json" \
        >/dev/null || fail "report $f"
    $PY - "$tmp/$f" <<'PY' || fail "fixture $f exports"
import csv, json, sys
b = sys.argv[1]
rep = json.load(open(b + ".json"))
rows = list(csv.DictReader(open(b + ".csv", newline="")))
tr = json.load(open(b + ".trace.json"))
for p in rep["processes"]:
    keys = set()
    for m in p["metrics"]:
        keys |= {s for s, _, _ in m["series"]}
    mine = [r for r in rows if r["pid"] == str(p["pid"])]
    assert len(mine) == len(keys), (p["pid"], len(mine), len(keys))
    assert any(e["ph"] == "C" and e["pid"] == p["pid"] for e in tr["traceEvents"])
PY
done
"$P" report "$F/traces/frag.pltrace" --torch-snapshot "$tmp/frag.pickle" >/dev/null || fail "frag snapshot"
$PY -c 'import pickle, sys; s = pickle.load(open(sys.argv[1], "rb")); assert s["device_traces"]' \
    "$tmp/frag.pickle" || fail "frag snapshot does not load"
# the CUDA hooks over the driver double: target_cuda's 14 allocations (a runtime call and the driver call under it
# are one), 14 frees, 2 maps, 2 unmaps and 1 OOM (tests/preload/test_cuda.c counts the same from the driver's log)
if [ -n "$DOUBLE" ] && [ -x "$T/target_cuda" ]; then
    PLATEAU_LIBCUDA=$DOUBLE "$P" run --no-report -o "$tmp/cuda" -- "$T/target_cuda" 40 >/dev/null 2>&1 ||
        fail "run target_cuda"
    "$P" report "$tmp/cuda" --torch-snapshot "$tmp/cuda.pickle" >/dev/null || fail "cuda snapshot"
    $PY - "$tmp/cuda.pickle" <<'PY' || fail "cuda snapshot content"
import pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
(tr,) = s["device_traces"]
n = {a: sum(e["action"] == a for e in tr) for a in {e["action"] for e in tr}}
assert n == {"segment_alloc": 14, "alloc": 14, "free_completed": 14, "segment_free": 14, "segment_map": 2,
             "segment_unmap": 2, "oom": 1}, n
assert s["segments"] == [], s["segments"]  # everything was freed
PY
    "$P" tune "$tmp/cuda.pickle" --capacity 1GiB >/dev/null 2>&1 || fail "tune cannot read the cuda snapshot"
else
    echo "CUDA driver double not built: the hooks' snapshot is not checked"
fi
echo "ok"
