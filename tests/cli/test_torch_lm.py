#!/usr/bin/env python3
"""Integration: an ordinary PyTorch script (tests/targets/torch_lm.py: 2-layer transformer LM, AdamW with
LR warmup and gradient clipping, a persistent 2-worker train DataLoader, validation every 50 steps through a second
2-worker DataLoader) under `plateau run`, judged by the run verdict and the process verdicts.

  healthy: no leaking process, run verdict "no leak" or "not decided", never "LEAK"; the text report opens with
           the verdict line and folds the DataLoader workers into one line (no "Not decided yet" block per worker);
  leak:    (each of --leak loss / outputs / cache) run verdict LEAK naming the trainer, leaking_pids = [trainer].

Usage: test_torch_lm.py PLATEAU TORCH_LM_PY [--variants none,cache] [--repeat N] [--steps N] [--unmarked]
The normal suite runs one healthy and one leaking run (marked); the repeat suite (cli.torch_lm_repeat, make test-repeat) repeats every
variant, marked and unmarked, and prints the counts. Needs Debian's python3-torch for /usr/bin/python3.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("plateau")
ap.add_argument("script")
ap.add_argument("--variants", default="none,cache")
ap.add_argument("--repeat", type=int, default=1)
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--unmarked", action="store_true", help="also run every variant without step markers")
ap.add_argument("--keep", help="keep the run directories under this directory")
ap.add_argument("--from-runs", help="judge run directories recorded before, DIR/<variant>-<m|u>-<i> (no new runs)")
args = ap.parse_args()
PY = "/usr/bin/python3"


def one(tmp, name, variant, marked, i):
    if args.from_runs:
        d = os.path.join(args.from_runs, f"{variant}-{'m' if marked else 'u'}-{i}")
        if not os.path.isdir(d):
            return None, None
        log = d + ".log"  # the recorder's plateau run output: no "plateau:" line yet = still running
        if os.path.exists(log) and "plateau:" not in open(log, errors="replace").read():
            return None, None
        js = os.path.join(tmp, name + ".json")
        r = subprocess.run([args.plateau, "report", d, "--json", js], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{name}: plateau report exited {r.returncode}\n{r.stderr}"
        with open(js) as f:
            return r.stdout, json.load(f)
    d = os.path.join(tmp, name)
    cmd = [args.plateau, "run", "--no-report", "-o", d, "--", PY, args.script, "--steps", str(args.steps),
           "--leak", variant] + ([] if marked else ["--no-mark"])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{name}: plateau run exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    js = d + ".json"
    r = subprocess.run([args.plateau, "report", d, "--json", js], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{name}: plateau report exited {r.returncode}\n{r.stderr}"
    with open(js) as f:
        rep = json.load(f)
    return r.stdout, rep


def check(name, variant, marked, text, rep):
    """Returns (ok, message)."""
    v, run = rep["verdict"], rep["run"]
    procs = run["processes"]
    pids = {p["pid"] for p in procs}
    trainer = next((p for p in procs if p["ppid"] not in pids), None)  # the run's root (pids may wrap around)
    if not trainer or procs[0]["pid"] != trainer["pid"]:
        return False, f"the trainer is not listed first: {[p['pid'] for p in procs][:5]}"
    first = text.splitlines()[0] if text else ""
    if not first.startswith("verdict: "):
        return False, f"text does not open with the verdict line: {first!r}"
    if first != v["line"]:
        return False, f"text and JSON verdicts differ: {first!r} vs {v['line']!r}"
    if variant == "none":
        if run["leaking_pids"] or v["kind"] not in ("no-leak", "undecided"):
            return False, f"healthy run: {v['line']} leaking={run['leaking_pids']}"
        if text.count("Not decided yet") > sum(1 for p in procs if p["role"] == "main"):
            return False, "a 'Not decided yet' block per worker"
        return True, v["line"]
    if not marked and v["kind"] == "undecided" and not run["leaking_pids"]:
        # unmarked: 1-second buckets, and growth since the start is presumed warmup for 100 of them; a run this
        # short may only be "not decided" (never "no leak"): counted apart in the summary
        return True, "(undecided, unmarked) " + v["line"]
    if v["kind"] != "leak" or not trainer or run["leaking_pids"] != [trainer["pid"]]:
        return False, f"leak not called: {v['line']} leaking={run['leaking_pids']}"
    return True, v["line"]


counts = {}
failures = []
tmpdir = args.keep or tempfile.mkdtemp(prefix="pl-test-torch-lm-")
for variant in args.variants.split(","):
    for marked in ([True, False] if args.unmarked else [True]):
        key = f"{variant}-{'marked' if marked else 'unmarked'}"
        for i in range(args.repeat):
            name = f"{key}-{i}"
            text, rep = one(tmpdir, name, variant, marked, i)
            if rep is None:
                continue
            ok, msg = check(name, variant, marked, text, rep)
            counts.setdefault(key, [0, 0, {}])
            counts[key][0] += ok
            counts[key][1] += 1
            kinds = counts[key][2]
            kinds[rep["verdict"]["kind"]] = kinds.get(rep["verdict"]["kind"], 0) + 1
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {msg}", flush=True)
            if not ok:
                failures.append(name)
                print(text)
print("\nsummary (passed/runs, run verdicts):")
for key, (ok, n, kinds) in counts.items():
    print(f"  {key:18s} {ok}/{n}  {kinds}")
if not args.keep:
    subprocess.run(["rm", "-rf", tmpdir])
sys.exit(1 if failures else 0)
