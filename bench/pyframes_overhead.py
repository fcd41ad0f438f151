#!/usr/bin/env python3
"""Wall-time cost of Python frames in plateau's traces (docs/python-frames.md), side by side with memray.

Runs each workload untraced, under `plateau run` with Python frames off (PLATEAU_PY_FRAMES=0), under `plateau run`
with them on (the default), and under `memray run` when a memray is given, interleaved round by round so machine
load hits every variant alike; prints each variant's median ratio to untraced over the rounds (and min..max), and
the ratio of frames on to frames off (what the Python frames themselves cost); wall time, and CPU time (user +
system of the command and its children), which a loaded machine disturbs less.
Workloads: a PyTorch CPU loop (tests/targets/py_torch_flat.py: unmarked, 200 steps), a pure-Python
allocation-heavy loop (bench/py_alloc_loop.py), that loop sampled 32x more often (the per-sample cost magnified),
and 50,000 allocations 31 frames deep with every allocation sampled (bench/py_deep_alloc.py: frames on minus off
over 50,000 is the cost of one capture).
Usage: pyframes_overhead.py PLATEAU [--memray MEMRAY] [--rounds N] [--only WORKLOAD-PREFIX]
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
ap = argparse.ArgumentParser()
ap.add_argument("plateau")
ap.add_argument("--memray")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--python", default="/usr/bin/python3")
ap.add_argument("--only", help="run only the workloads whose name starts with this")
args = ap.parse_args()

# name: (script and arguments, extra `plateau run` options, compare with memray)
workloads = {
    "torch": ([os.path.join(root, "tests", "targets", "py_torch_flat.py")], [], True),
    "pure-python": ([os.path.join(here, "py_alloc_loop.py"), "20000"], [], True),
    # the per-sample cost magnified: 32x the default sampling rate
    "pure-python, --sample-bytes 16K": ([os.path.join(here, "py_alloc_loop.py"), "20000"], ["--sample-bytes", "16K"],
                                        False),
    # every allocation sampled, 31 Python frames deep: frames on - off = the capture's cost per sample
    "deep, every allocation sampled": ([os.path.join(here, "py_deep_alloc.py"), "50000", "30"],
                                       ["--sample-bytes", "0"], False),
}


def variants(tmp, extra, memray):
    def pl(env):
        return lambda cmd, n: ([args.plateau, "run", "--no-report", "-o", os.path.join(tmp, n)] + extra + ["--"] + cmd,
                               env)
    v = {"untraced": lambda cmd, n: (cmd, {}), "plateau, frames off": pl({"PLATEAU_PY_FRAMES": "0"}),
         "plateau": pl({})}
    if args.memray and memray:
        v["memray"] = lambda cmd, n: ([args.memray, "run", "-q", "-o", os.path.join(tmp, n + ".bin")] + cmd[1:], {})
    return v


def timed(cmd, env_extra):
    """(wall seconds, CPU seconds of the command and its children: user + system)"""
    env = dict(os.environ, PLATEAU_QUIET="1", **env_extra)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


with tempfile.TemporaryDirectory(prefix="pl-bench-pyframes-") as tmp:
    for wname, (script, extra, memray) in workloads.items():
        if args.only and not wname.startswith(args.only):
            continue
        vs = variants(tmp, extra, memray)
        cmd = [args.python] + script
        times = {k: [] for k in vs}
        timed(cmd, {})  # warm the page cache
        for r in range(args.rounds):
            for k, f in vs.items():
                c, e = f(cmd, f"{wname}-{r}-{len(times[k])}-{k.replace(' ', '_').replace(',', '')}")
                times[k].append(timed(c, e))
            for p in os.listdir(tmp):  # keep the disk use of one round
                full = os.path.join(tmp, p)
                shutil.rmtree(full) if os.path.isdir(full) else os.unlink(full)
        for which, idx in (("wall", 0), ("cpu", 1)):
            base = [t[idx] for t in times["untraced"]]
            print(f"{wname} [{which}]: untraced median {statistics.median(base):.2f} s over {args.rounds} rounds")
            for k in vs:
                if k == "untraced":
                    continue
                ratios = [t[idx] / b for t, b in zip(times[k], base)]
                print(f"  {k:22s} median {statistics.median(ratios):.3f}x  (min {min(ratios):.3f}, "
                      f"max {max(ratios):.3f}; median {statistics.median(t[idx] for t in times[k]):.3f} s)")
            on_off = [a[idx] / b[idx] for a, b in zip(times["plateau"], times["plateau, frames off"])]
            print(f"  frames on / off        median {statistics.median(on_off):.3f}x  (min {min(on_off):.3f}, "
                  f"max {max(on_off):.3f})", flush=True)
