"""The GPU check's judgements (tools/gpu-check.sh, docs/gpu-check.md): one subcommand a step, reading what the step
wrote. Each prints what it compared, one line at a time; the last line is the step's summary for the table. Exit
status 0 when the step passes, 1 when it fails. Standard library only (the GPU machine has nothing else for sure).

  losses CPU_LOG CUDA_LOG          step 2: plateau-train's per-step losses on the two devices
  double-run STEP_DIR              step 3 over the driver double: hooks vs the double's log, dev.* verdicts
  torch-run STEP_DIR SCRIPT        step 3 on a GPU: hooks, CUPTI and torch's stats, dev.* verdicts, the leak's line
  use-allocator PLATEAU REFERENCE  step 4: plateau's allocator stats vs the live tensors, losses vs torch's allocator
  snapshot TORCH PLATEAU TUNE_OUT  step 5: --torch-snapshot vs torch.cuda.memory._snapshot(), plateau tune's output
  cost STEP_DIR ROUNDS             step 6: the training loop's time traced / untraced
"""
import json
import os
import pickle
import re
import statistics
import sys

# Step 2's tolerances: the first step's loss is a forward over identical parameters (only reduction order differs:
# equal to the 4 printed decimals, give or take one rounding); later steps follow AdamW updates, where float
# rounding in a gradient near zero can move a parameter by up to lr: agree within 0.02 (~0.4 % of the initial loss).
FIRST_STEP_TOL = 2e-4
ALL_STEPS_TOL = 0.02
# Step 4: losses through plateau's allocator vs torch's own (same kernels, same inputs: memory placement must not
# change a result).
LOSS_REL_TOL = 1e-5
MiB = float(1 << 20)


def out(line):
    print(line)
    sys.stdout.flush()


def verdict(ok, summary):
    out(summary)
    sys.exit(0 if ok else 1)


def mib(x):
    return "?" if x is None else "%.1f MiB" % (x / MiB)


# ----------------------------------------------------------------------------------------------------------- step 2

def losses_of(path):
    got = {}
    for line in open(path, errors="replace"):
        m = re.match(r"step\s+(\d+)\s+loss\s+([0-9.naif+-]+)", line)
        if m:
            got[int(m.group(1))] = float(m.group(2))
    return got


def cmd_losses(cpu_log, cuda_log):
    cpu, cuda = losses_of(cpu_log), losses_of(cuda_log)
    steps = sorted(set(cpu) & set(cuda))
    if not steps or 1 not in steps:
        verdict(False, "no common steps with a loss (cpu %d, cuda %d lines)" % (len(cpu), len(cuda)))
    diffs = [(s, abs(cpu[s] - cuda[s])) for s in steps]
    for s, d in diffs:
        out("step %3d  cpu %.4f  cuda %.4f  |diff| %.4f" % (s, cpu[s], cuda[s], d))
    worst = max(diffs, key=lambda x: x[1])
    first = dict(diffs)[1]
    ok = first <= FIRST_STEP_TOL and worst[1] <= ALL_STEPS_TOL and all(d == d for _, d in diffs)
    verdict(ok, "%d steps: step 1 loss cpu %.4f cuda %.4f (|diff| %.4f, tol %g); worst |diff| %.4f at step %d "
                "(tol %g); last cpu %.4f cuda %.4f" % (len(steps), cpu[1], cuda[1], first, FIRST_STEP_TOL, worst[1],
                                                       worst[0], ALL_STEPS_TOL, cpu[steps[-1]], cuda[steps[-1]]))


# ----------------------------------------------------------------------------------------------------------- step 3

def main_process(report):
    """The process with the most steps (the training script; the launcher and helpers have none)."""
    procs = [p for p in report.get("processes", []) if p.get("role") == "main"] or report.get("processes", [])
    if not procs:
        return None, None
    def steps(p):
        for r in report.get("run", {}).get("processes", []):
            if r.get("pid") == p.get("pid"):
                return r.get("steps") or 0
        return 0
    p = max(procs, key=steps)
    detail = next((r for r in report.get("run", {}).get("processes", []) if r.get("pid") == p.get("pid")), {})
    return p, detail


def kind(v):
    """A verdict's kind: process and run verdicts are objects ({"kind": "leak", ...}), a metric's is a string."""
    return v.get("kind") if isinstance(v, dict) else v


def dev_metrics(proc):
    return {m["name"]: m for m in proc.get("metrics", []) if m.get("name", "").startswith("dev.")}


def judge_pair(sdir, problems):
    """dev.* verdicts of S/leak.json (a leak) and S/healthy.json (not a leak). Returns (leak_proc, leak_detail,
    summary words)."""
    words = []
    leak_proc = leak_detail = None
    for mode in ("leak", "healthy"):
        rep = json.load(open(os.path.join(sdir, mode + ".json")))
        proc, detail = main_process(rep)
        if proc is None:
            problems.append("%s: no process in the report" % mode)
            continue
        devs = dev_metrics(proc)
        leaking = sorted(n for n, m in devs.items() if m.get("verdict") == "leak")
        out("%s run: pid %s, %s steps, process verdict %s, run verdict %s, dev.* verdicts %s" % (
            mode, proc.get("pid"), (detail or {}).get("steps"), kind(proc.get("verdict")), kind(rep.get("verdict")),
            {n: m.get("verdict") for n, m in sorted(devs.items())}))
        if not devs:
            problems.append("%s: no dev.* series" % mode)
        if mode == "leak":
            leak_proc, leak_detail = proc, detail
            if kind(proc.get("verdict")) != "leak" or not leaking:
                problems.append("the leak was not called a leak (process %s, leaking dev.* %s)"
                                % (kind(proc.get("verdict")), leaking or "none"))
            else:
                per = devs[leaking[0]].get("leak") or {}
                words.append("leak: %s %s/step" % (leaking[0], mib(per.get("per_step"))))
        else:
            if kind(proc.get("verdict")) == "leak" or leaking:
                problems.append("the healthy run was called leaking (process %s, dev.* %s)"
                                % (kind(proc.get("verdict")), leaking))
            else:
                words.append("healthy: %s" % kind(proc.get("verdict")))
    return leak_proc, leak_detail, words


# The double's log lines the preload's hooks turn into one device record each (docs/cuda-interception.md): every
# successful allocation (pinned host memory included), free, map and unmap, and every allocation refused for lack
# of memory (an OOM record).
DRIVER_ALLOCS = ("cuMemAlloc_v2", "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemAllocManaged", "cuMemAllocPitch_v2",
                 "cuMemHostAlloc", "cuMemAllocHost_v2")
DRIVER_FREES = ("cuMemFree_v2", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemFreeHost")


def cmd_double_run(sdir):
    problems = []
    calls = {"alloc": 0, "free": 0, "map": 0, "unmap": 0, "oom": 0}
    for line in open(os.path.join(sdir, "driver.log")):
        f = line.split()
        if len(f) < 3:
            continue
        what = ("alloc" if f[1] in DRIVER_ALLOCS else "free" if f[1] in DRIVER_FREES else
                "map" if f[1] == "cuMemMap" else "unmap" if f[1] == "cuMemUnmap" else None)
        if what and f[2] == "CUDA_SUCCESS":
            calls[what] += 1
        elif what == "alloc" and f[2] == "CUDA_ERROR_OUT_OF_MEMORY":
            calls["oom"] += 1
    expected = sum(calls.values())
    summary = ""
    for line in open(os.path.join(sdir, "hooks.out"), errors="replace"):
        if line.startswith("plateau cuda: "):
            summary = line.strip()
    m = re.search(r" records=(\d+)", summary)
    records = int(m.group(1)) if m else None
    out("driver double's log: %(alloc)d allocations, %(free)d frees, %(map)d maps, %(unmap)d unmaps, %(oom)d OOMs"
        % calls)
    out("hooks: %s" % (summary or "no 'plateau cuda:' line (PLATEAU_DEBUG_CUDA=1)"))
    if records is None:
        problems.append("the hooks printed no summary")
    elif records != expected or not calls["alloc"]:
        problems.append("the hooks recorded %d device events, the double logged %d" % (records, expected))
    words = ["stand-in runtime: hooks recorded %s device events = the double's %d (%d allocations)"
             % (records, expected, calls["alloc"])]
    _, _, w = judge_pair(sdir, problems)
    words += w
    words.append("the leak's line: GPU-only (Python)")
    if problems:  # what failed first, then what held: the table keeps both
        verdict(False, "; ".join(problems) + (" | held: " + "; ".join(words) if words else ""))
    verdict(True, "; ".join(words))


def find_line(obj, script, line):
    """Does the report name SCRIPT:LINE anywhere (a site's Python frame, a holder's line)?"""
    base = os.path.basename(script)
    if isinstance(obj, dict):
        f = obj.get("file")
        if obj.get("line") == line and isinstance(f, str) and os.path.basename(f) == base:
            return True
        return any(find_line(v, script, line) for v in obj.values())
    if isinstance(obj, list):
        return any(find_line(v, script, line) for v in obj)
    if isinstance(obj, str):  # train_cuda.py:4 is not train_cuda.py:46
        return re.search(r"(?<![\w.])%s:%d(?!\d)" % (re.escape(base), line), obj) is not None
    return False


def find_key(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            r = find_key(v, key)
            if r is not None:
                return r
    elif isinstance(obj, list):
        for v in obj:
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def cmd_torch_run(sdir, script):
    problems = []
    # the marked code line: a comment `# gpu-check: leak` (the docstring that mentions the marker is not it)
    leak_line = next(i for i, l in enumerate(open(script), 1) if "# gpu-check: leak" in l)
    leak_proc, leak_detail, words = judge_pair(sdir, problems)
    rep = json.load(open(os.path.join(sdir, "leak.json")))
    torch = json.load(open(os.path.join(sdir, "leak.torch.json")))
    ts = torch["stats"]
    out("torch %s, CUDA %s, %s: torch.cuda.memory_stats(): %s" % (torch.get("torch"), torch.get("cuda"),
                                                                   torch.get("device"), json.dumps(ts)))
    cross = find_key(leak_detail, "device_crosscheck") or find_key(leak_proc, "device_crosscheck") \
        or find_key(rep, "device_crosscheck")
    out("plateau device_crosscheck: %s" % json.dumps(cross))
    if not cross:
        problems.append("no CUPTI cross-check in the report (CUPTI did not record: see leak.out)")
    else:
        if cross.get("hook_allocs", 0) < (ts.get("segment.all.allocated") or 0):
            problems.append("hooks saw %s allocations, torch made %s segments" % (cross.get("hook_allocs"),
                                                                                  ts.get("segment.all.allocated")))
        if cross.get("hook_bytes", 0) < (ts.get("reserved_bytes.all.allocated") or 0):
            problems.append("hooks saw %s, torch reserved %s in all" % (mib(cross.get("hook_bytes")),
                                                                       mib(ts.get("reserved_bytes.all.allocated"))))
        if not cross.get("agree"):
            problems.append("hooks and CUPTI differ: %s" % json.dumps(cross))
        words.insert(0, "hooks %s allocs (%s), CUPTI %s (%s), torch %s segments (%s)" % (
            cross.get("hook_allocs"), mib(cross.get("hook_bytes")), cross.get("cupti_allocs"),
            mib(cross.get("cupti_bytes")), ts.get("segment.all.allocated"), mib(ts.get("reserved_bytes.all.allocated"))))
    devs = dev_metrics(leak_proc or {})
    for name, key in (("dev.reserved", "reserved_bytes.all.peak"), ("dev.allocated", "allocated_bytes.all.peak")):
        m = devs.get(name)
        out("%s peak %s (plateau, step samples) vs torch %s %s" % (name, mib(((m or {}).get("peak") or {}).get("value")),
                                                                 key, mib(ts.get(key))))
    named = find_line(rep, script, leak_line)
    out("leak line %s:%d named in the report: %s" % (os.path.basename(script), leak_line, named))
    if not named:
        problems.append("the leak's line %s:%d is not named in the report" % (os.path.basename(script), leak_line))
    else:
        words.append("named at %s:%d" % (os.path.basename(script), leak_line))
    if problems:  # what failed first, then what held: the table keeps both
        verdict(False, "; ".join(problems) + (" | held: " + "; ".join(words) if words else ""))
    verdict(True, "; ".join(words))


# ----------------------------------------------------------------------------------------------------------- step 4

def empty_cache_problems(p):
    """After the model and its optimizer are freed, plateau.torch.empty_cache() gives back exactly what the
    allocator called releasable (whole free segments): reserved drops by that, nothing releasable is left, and
    what is still allocated (torch's own workspaces) stays. Reserved need not reach allocated: a segment that still
    holds a block keeps its free part, as with torch's own empty_cache."""
    b, a = p.get("before_empty_cache"), p.get("after_empty_cache")
    if not p.get("empty_cache") or not isinstance(b, dict) or not isinstance(a, dict):
        return ["empty_cache: %s, before %s, after %s" % (p.get("empty_cache"), b, a)]
    problems = []
    if not b.get("releasable"):
        problems.append("empty_cache: nothing releasable after the model was freed (reserved %s, allocated %s)"
                        % (b.get("reserved"), b.get("allocated")))
    if a.get("releasable") != 0:
        problems.append("empty_cache: %s bytes still releasable after it" % a.get("releasable"))
    if a.get("reserved") != (b.get("reserved") or 0) - (b.get("releasable") or 0):
        problems.append("empty_cache: reserved %s -> %s, expected a drop of the releasable %s"
                        % (b.get("reserved"), a.get("reserved"), b.get("releasable")))
    if a.get("allocated") != b.get("allocated"):
        problems.append("empty_cache: allocated changed %s -> %s" % (b.get("allocated"), a.get("allocated")))
    return problems


def cmd_use_allocator(plateau_json, reference_json):
    p, r = json.load(open(plateau_json)), json.load(open(reference_json))
    problems = []
    if not p.get("use_allocator"):
        verdict(False, "use_allocator() returned False")
    rows, ref = p["rows"], r["rows"]
    rest = set()
    for row in rows:
        out(json.dumps(row))
        if row["allocated"] is None or row["allocated"] < row["expected"]:
            problems.append("step %d: plateau allocated %s < live storages %s" % (row["step"], row["allocated"],
                                                                                  row["expected"]))
        elif row["step"] > 0:
            rest.add(row["allocated"] - row["expected"])
        if row["reserved"] is None or row["reserved"] < (row["allocated"] or 0):
            problems.append("step %d: reserved %s < allocated %s" % (row["step"], row["reserved"], row["allocated"]))
    if len(rest) > 1:
        problems.append("allocated - live storages varies over the steps: %s" % sorted(rest))
    worst = max(abs(a["loss"] - b["loss"]) / max(abs(b["loss"]), 1e-12) for a, b in zip(rows, ref))
    if len(rows) != len(ref) or worst > LOSS_REL_TOL:
        problems.append("losses differ from torch's allocator's: worst relative %.2g (tol %g)" % (worst, LOSS_REL_TOL))
    problems += empty_cache_problems(p)
    last = rows[-1]
    summary = ("%d steps: allocated %s = live storages %s + %s torch's own (constant), reserved %s, %s device "
               "allocations; losses = torch's allocator's (worst rel %.1g); model freed, empty_cache: reserved %s -> %s"
               % (len(rows), mib(last["allocated"]), mib(last["expected"]), mib(next(iter(rest), 0)),
                  mib(last["reserved"]), last["device_allocs"], worst,
                  mib((p.get("before_empty_cache") or {}).get("reserved")),
                  mib((p.get("after_empty_cache") or {}).get("reserved"))))
    if problems:
        verdict(False, "; ".join(problems))
    verdict(True, summary)


# ----------------------------------------------------------------------------------------------------------- step 5

def cmd_snapshot(torch_pickle, plateau_pickle, tune_out):
    t = pickle.load(open(torch_pickle, "rb"))
    p = pickle.load(open(plateau_pickle, "rb"))
    problems = []
    torch_segs = {(s["address"], s["total_size"]) for s in t.get("segments", [])}
    seen = set()
    for trace in p.get("device_traces", []):
        for e in trace:
            if e.get("action") == "segment_alloc":
                seen.add((e.get("addr"), e.get("size")))
    plateau_end = {(s["address"], s["total_size"]) for s in p.get("segments", [])}
    matched = torch_segs & seen
    out("torch segments %d (%s); plateau segment_alloc events %d, segments at the end %d; torch's found in plateau's "
        "history %d, in plateau's end state %d" % (len(torch_segs), mib(sum(s for _, s in torch_segs)), len(seen),
                                                   len(plateau_end), len(matched), len(torch_segs & plateau_end)))
    for a, s in sorted(torch_segs - seen)[:10]:
        out("  torch segment 0x%x (%d bytes) not in plateau's snapshot" % (a, s))
    if not torch_segs or matched != torch_segs:
        problems.append("%d of torch's %d segments are in plateau's snapshot" % (len(matched), len(torch_segs)))
    try:
        from torch.cuda import _memory_viz as mv
        n = 0
        for fn in ("segment_plot", "trace_plot"):
            if hasattr(mv, fn):
                html = getattr(mv, fn)(p)
                n += 1
                out("torch.cuda._memory_viz.%s read plateau's snapshot: %d characters" % (fn, len(html)))
        if not n:
            problems.append("torch's _memory_viz has neither segment_plot nor trace_plot")
        viz = "memory_viz read it (%d views)" % n
    except Exception as e:
        problems.append("torch's _memory_viz failed on plateau's snapshot: %s: %s" % (type(e).__name__, e))
        viz = ""
    tune = [l.strip() for l in open(tune_out, errors="replace") if l.strip()]
    out("plateau tune: %d lines; first: %s" % (len(tune), tune[0] if tune else ""))
    if not tune:
        problems.append("plateau tune printed nothing")
    if problems:
        verdict(False, "; ".join(problems))
    verdict(True, "%d/%d torch segments (%s) in plateau's snapshot; %s; tune: %s" % (
        len(matched), len(torch_segs), mib(sum(s for _, s in torch_segs)), viz, (tune[0] if tune else "")[:100]))


# ----------------------------------------------------------------------------------------------------------- step 6

def cmd_cost(sdir, rounds):
    pairs = []
    for r in range(1, int(rounds) + 1):
        u = json.load(open(os.path.join(sdir, "untraced.%d.json" % r)))["loop_seconds"]
        t = json.load(open(os.path.join(sdir, "traced.%d.json" % r)))["loop_seconds"]
        pairs.append((u, t))
        out("round %d: training loop untraced %.3f s, traced %.3f s, ratio %.3f" % (r, u, t, t / u))
    ratios = [t / u for u, t in pairs]
    verdict(True, "%d interleaved rounds of 300 steps: untraced median %.3f s, traced %.3f s, traced/untraced median "
                  "%.3f (min %.3f, max %.3f)" % (len(pairs), statistics.median(u for u, _ in pairs),
                                                 statistics.median(t for _, t in pairs), statistics.median(ratios),
                                                 min(ratios), max(ratios)))


if __name__ == "__main__":
    cmds = {"losses": cmd_losses, "double-run": cmd_double_run, "torch-run": cmd_torch_run,
            "use-allocator": cmd_use_allocator, "snapshot": cmd_snapshot, "cost": cmd_cost}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.stderr.write(__doc__)
        sys.exit(2)
    try:
        cmds[sys.argv[1]](*sys.argv[2:])
    except (OSError, ValueError, KeyError, TypeError, StopIteration, pickle.UnpicklingError) as e:
        verdict(False, "%s: %s: %s" % (sys.argv[1], type(e).__name__, e))
