#!/usr/bin/env python3
"""Unit: the GPU check's judgements of its GPU-only steps (tools/gpu/check.py), on hand-made inputs shaped like
what those steps write on a GPU (plateau-train logs, plateau's JSON report and torch's stats, use_allocator.py's
rows, torch and plateau snapshots, loop times). They never run here otherwise, so each is checked to PASS on good
input and to FAIL on each way it is meant to catch. A stand-in `torch.cuda._memory_viz` (two functions returning
text) takes the place of torch 2's for step 5.
Usage: test_gpu_check_eval.py CHECK_PY
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

CHECK = sys.argv[1]
tmp = tempfile.mkdtemp()
MiB = 1 << 20
failures = []


def run(*args, env=None):
    r = subprocess.run([sys.executable, CHECK] + [str(a) for a in args], capture_output=True, text=True, env=env)
    return r.returncode, (r.stdout.strip().splitlines() or [""])[-1], r.stdout + r.stderr


def expect(name, rc_want, args, words=(), env=None):
    rc, last, full = run(*args, env=env)
    ok = rc == rc_want and all(w in last for w in words)
    print("%s %s: rc %d: %s" % ("ok  " if ok else "FAIL", name, rc, last))
    if not ok:
        failures.append(name)
        print(full)


def write(name, text):
    p = os.path.join(tmp, name)
    with open(p, "w") as f:
        f.write(text)
    return p


# ---- step 2: losses
def train_log(name, losses):
    return write(name, "device: x\n" + "".join("step %5d  loss %.4f  norm  0.500  T   64     1.0 ms\n" % (s, l)
                                               for s, l in enumerate(losses, 1)))


base = [5.5432 - 0.05 * i for i in range(20)]
cpu = train_log("cpu.log", base)
expect("losses equal", 0, ["losses", cpu, train_log("cuda_eq.log", base)], ["20 steps"])
expect("losses within tolerance", 0, ["losses", cpu, train_log("cuda_ok.log", [base[0]] + [l + 0.01 for l in base[1:]])])
expect("first step off", 1, ["losses", cpu, train_log("cuda_first.log", [base[0] + 0.001] + base[1:])])
expect("late step off", 1, ["losses", cpu, train_log("cuda_late.log", base[:10] + [l + 0.05 for l in base[10:]])],
       ["worst |diff| 0.0500 at step 11"])
expect("cuda log without losses", 1, ["losses", cpu, write("cuda_none.log", "--device cuda: no\n")])


# ---- step 3 on a GPU: plateau's reports and torch's stats
SCRIPT = write("train_cuda.py", "import torch\n\n\nkept.append(x)  # gpu-check: leak\n")  # the leak on line 4


def report(kind, dev_verdict, line=None, cross=None):
    proc = {"pid": 7, "role": "main", "verdict": {"kind": kind}, "metrics": [
        {"name": "heap.bytes", "verdict": "flat"},
        {"name": "dev.allocated", "verdict": dev_verdict, "peak": {"value": 200 * MiB, "step": 199},
         "leak": {"per_step": MiB} if dev_verdict == "leak" else None},
        {"name": "dev.reserved", "verdict": "plateau", "peak": {"value": 220 * MiB, "step": 199}}]}
    detail = {"pid": 7, "steps": 200, "device_crosscheck": cross, "sites": None}
    if line:
        detail["sites"] = {"top": [{"python": {"name": "train_cuda.py:%d in <module>" % line,
                                               "file": "/x/train_cuda.py", "line": line}}]}
    return {"verdict": {"kind": kind}, "processes": [proc], "run": {"processes": [detail]}}


def step3(name, leak, healthy, torch_stats):
    d = os.path.join(tmp, name)
    os.mkdir(d)
    json.dump(leak, open(os.path.join(d, "leak.json"), "w"))
    json.dump(healthy, open(os.path.join(d, "healthy.json"), "w"))
    json.dump({"torch": "2.11.0", "cuda": "13.0", "device": "H100", "stats": torch_stats},
              open(os.path.join(d, "leak.torch.json"), "w"))
    return d


CROSS = {"hook_allocs": 12, "hook_bytes": 240 * MiB, "cupti_allocs": 12, "cupti_bytes": 240 * MiB, "agree": True}
TS = {"segment.all.allocated": 11, "reserved_bytes.all.allocated": 220 * MiB, "reserved_bytes.all.peak": 220 * MiB,
      "allocated_bytes.all.peak": 201 * MiB}
good_leak, good_healthy = report("leak", "leak", 4, CROSS), report("no-leak", "plateau")
expect("torch run good", 0, ["torch-run", step3("t_good", good_leak, good_healthy, TS), SCRIPT],
       ["hooks 12 allocs", "CUPTI 12", "torch 11 segments", "leak: dev.allocated 1.0 MiB/step", "healthy: no-leak",
        "named at train_cuda.py:4"])
expect("torch run: leak missed", 1, ["torch-run", step3("t_missed", report("no-leak", "plateau", 4, CROSS),
                                                        good_healthy, TS), SCRIPT], ["the leak was not called a leak"])
expect("torch run: healthy called leaking", 1,
       ["torch-run", step3("t_false", good_leak, report("leak", "leak"), TS), SCRIPT], ["healthy run was called leaking"])
# the report names line 46 only: not the leak's line 4 (the H200's first run matched "train_cuda.py:4" inside
# another line's number, after taking the docstring's mention of the marker for the line)
expect("torch run: a longer line number is not the line", 1,
       ["torch-run", step3("t_prefix", report("leak", "leak", 46, CROSS), good_healthy, TS), SCRIPT],
       ["train_cuda.py:4 is not named"])
expect("torch run: line not named", 1, ["torch-run", step3("t_line", report("leak", "leak", 3, CROSS), good_healthy,
                                                           TS), SCRIPT], ["train_cuda.py:4 is not named"])
expect("torch run: no CUPTI", 1, ["torch-run", step3("t_cupti", report("leak", "leak", 4, None), good_healthy, TS),
                                  SCRIPT], ["no CUPTI cross-check"])
expect("torch run: hooks missed segments", 1,
       ["torch-run", step3("t_hooks", report("leak", "leak", 4, dict(CROSS, hook_allocs=9)), good_healthy, TS), SCRIPT],
       ["hooks saw 9 allocations, torch made 11 segments"])
expect("torch run: CUPTI differs", 1,
       ["torch-run", step3("t_differ", report("leak", "leak", 4, dict(CROSS, agree=False)), good_healthy, TS), SCRIPT],
       ["hooks and CUPTI differ"])


# ---- step 4: use_allocator rows against the reference
GOOD_BEFORE = {"allocated": 9 * MiB, "reserved": 20 * MiB, "releasable": 8 * MiB, "segments": 5}
GOOD_AFTER = {"allocated": 9 * MiB, "reserved": 12 * MiB, "releasable": 0, "segments": 3}


def alloc_rows(name, rows, ref_losses, empty=True, before=GOOD_BEFORE, after=GOOD_AFTER):
    p = {"use_allocator": True, "rows": rows, "empty_cache": empty, "before_empty_cache": before,
         "after_empty_cache": after}
    r = {"rows": [{"step": i, "loss": l} for i, l in enumerate(ref_losses)]}
    return write(name + ".p.json", json.dumps(p)), write(name + ".r.json", json.dumps(r))


def rows(n=10, rest=8 * MiB, loss=2.3):
    return [{"step": i, "loss": loss - 0.01 * i, "expected": 1 * MiB, "allocated": 1 * MiB + rest,
             "reserved": 20 * MiB, "blocks": 30, "device_allocs": 2, "ooms": 0} for i in range(n)]


ref = [2.3 - 0.01 * i for i in range(10)]
expect("use_allocator good", 0, ["use-allocator", *alloc_rows("ua_good", rows(), ref)],
       ["10 steps", "+ 8.0 MiB torch's own"])
bad = rows()
bad[5]["allocated"] = MiB // 2
expect("use_allocator: fewer bytes than the live tensors", 1, ["use-allocator", *alloc_rows("ua_low", bad, ref)],
       ["step 5: plateau allocated"])
bad = rows()
bad[7]["allocated"] += 512
expect("use_allocator: remainder varies", 1, ["use-allocator", *alloc_rows("ua_vary", bad, ref)], ["varies"])
expect("use_allocator: losses differ", 1, ["use-allocator", *alloc_rows("ua_loss", rows(), [l + 1e-3 for l in ref])],
       ["losses differ"])
expect("use_allocator: empty_cache", 1, ["use-allocator", *alloc_rows("ua_empty", rows(), ref, empty=False)],
       ["empty_cache"])
# the H200's first run called reserved above allocated a failure although every segment still held a block (the
# old criterion, "reserved <= allocated" with the model alive); now the model is freed first, and what is judged
# is the allocator's own releasable bytes
expect("use_allocator: nothing releasable", 1,
       ["use-allocator", *alloc_rows("ua_norel", rows(), ref, before=dict(GOOD_BEFORE, releasable=0),
                                     after=dict(GOOD_AFTER, reserved=20 * MiB))], ["nothing releasable"])
expect("use_allocator: a cached segment kept", 1,
       ["use-allocator", *alloc_rows("ua_kept", rows(), ref, after=dict(GOOD_AFTER, reserved=14 * MiB,
                                                                        releasable=2 * MiB))],
       ["still releasable", "expected a drop of the releasable"])
expect("use_allocator: empty_cache freed a live block", 1,
       ["use-allocator", *alloc_rows("ua_live", rows(), ref, after=dict(GOOD_AFTER, allocated=8 * MiB))],
       ["allocated changed"])
p_refused = write("ua_refused.json", json.dumps({"use_allocator": False}))
expect("use_allocator refused", 1, ["use-allocator", p_refused, p_refused], ["returned False"])

# ---- step 5: snapshots (a stand-in torch.cuda._memory_viz on PYTHONPATH)
viz = os.path.join(tmp, "viz")
os.makedirs(os.path.join(viz, "torch", "cuda"))
write("viz/torch/__init__.py", "")
write("viz/torch/cuda/__init__.py", "")
write("viz/torch/cuda/_memory_viz.py", "def segment_plot(s):\n    return 'x' * len(s['segments'])\n\n"
      "def trace_plot(s):\n    return 'y' * len(s['device_traces'][0])\n")
env = dict(os.environ, PYTHONPATH=viz)
segs = [{"address": 0x7f0000000000, "total_size": 20 * MiB}, {"address": 0x7f0001400000, "total_size": 2 * MiB}]
tsnap = os.path.join(tmp, "torch.pickle")
pickle.dump({"segments": segs, "device_traces": [[]]}, open(tsnap, "wb"))


def psnap(name, seg_list):
    p = os.path.join(tmp, name)
    pickle.dump({"segments": [{"address": a, "total_size": s, "blocks": []} for a, s in seg_list],
                 "device_traces": [[{"action": "segment_alloc", "addr": a, "size": s} for a, s in seg_list]]},
                open(p, "wb"))
    return p


tune = write("tune.txt", "best: expandable_segments:True  reserved peak -12%\n")
both = [(s["address"], s["total_size"]) for s in segs]
expect("snapshot good", 0, ["snapshot", tsnap, psnap("p_good.pickle", both + [(0x7f0002000000, 4 * MiB)]), tune],
       ["2/2 torch segments (22.0 MiB)", "memory_viz read it (2 views)", "tune: best"], env=env)
expect("snapshot: a segment missing", 1, ["snapshot", tsnap, psnap("p_miss.pickle", both[:1]), tune],
       ["1 of torch's 2 segments"], env=env)
expect("snapshot: size differs", 1, ["snapshot", tsnap, psnap("p_size.pickle", [both[0], (both[1][0], 4 * MiB)]), tune],
       ["1 of torch's 2 segments"], env=env)
expect("snapshot: tune silent", 1, ["snapshot", tsnap, psnap("p_tune.pickle", both), write("tune0.txt", "")],
       ["plateau tune printed nothing"], env=env)

# ---- step 6: loop times
cost = os.path.join(tmp, "cost")
os.mkdir(cost)
for r, (u, t) in enumerate([(1.0, 1.1), (1.2, 1.26), (1.0, 1.3)], 1):
    json.dump({"loop_seconds": u}, open(os.path.join(cost, "untraced.%d.json" % r), "w"))
    json.dump({"loop_seconds": t}, open(os.path.join(cost, "traced.%d.json" % r), "w"))
expect("cost", 0, ["cost", cost, 3], ["median 1.100", "min 1.050, max 1.300"])
os.remove(os.path.join(cost, "traced.3.json"))
expect("cost: a round missing", 1, ["cost", cost, 3], ["FileNotFoundError"])

write("viz/torch/cuda/_memory_viz.py", "def compare(a, b):\n    return ''\n")  # a torch without the views
expect("snapshot: memory_viz without views", 1, ["snapshot", tsnap, psnap("p_noviz.pickle", both), tune],
       ["neither segment_plot nor trace_plot"], env=env)

shutil.rmtree(tmp)
if failures:
    print("FAILED: %s" % ", ".join(failures))
    sys.exit(1)
print("ok: every judgement passes good input and catches what it is for")
