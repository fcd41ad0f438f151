#!/usr/bin/env python3
"""Integration: a PyTorch CPU training loop under `plateau run`, then `plateau report --json`.

A loop that keeps each step's graph alive must be reported as a host leak (on live heap bytes/count); the same loop
without the leak must have no leaking process (process verdict, docs/verdict.md section 6: RSS beside a flat live
heap, PSS and file pages are findings, never a leak). Needs Debian's python3-torch for /usr/bin/python3 (the Makefile installs
it); a missing torch is a failure, not a skip, so CI cannot pass without running this.
Usage: test_torch.py PLATEAU TORCH_LOOP_PY
"""
import json
import os
import subprocess
import sys
import tempfile

plateau, loop = sys.argv[1], sys.argv[2]
PY = "/usr/bin/python3"


def run(tmp, name, extra):
    d = os.path.join(tmp, name)
    r = subprocess.run([plateau, "run", "--no-report", "-o", d, "--", PY, loop, "--steps", "200"] + extra,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{name}: plateau run exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    out = os.path.join(tmp, name + ".json")
    r = subprocess.run([plateau, "report", d, "--json", out], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{name}: plateau report exited {r.returncode}\n{r.stderr}"
    print(r.stdout)
    with open(out) as f:
        rep = json.load(f)
    procs = [p for p in rep["processes"] if any(m["name"] == "heap.bytes" for m in p["metrics"])]
    assert procs, f"{name}: no process with a live-heap series"
    return ({m["name"]: m["verdict"] for m in procs[0]["metrics"]}, [x["code"] for x in procs[0]["diagnosis"]],
            rep)


with tempfile.TemporaryDirectory(prefix="pl-test-torch-") as tmp:
    leak, dx, rep = run(tmp, "leak", ["--leak"])
    assert rep["verdict"]["kind"] == "leak", rep["verdict"]
    assert rep["verdict"]["line"].startswith("verdict: LEAK in pid "), rep["verdict"]
    assert leak["heap.bytes"] == "leak" or leak["heap.count"] == "leak", f"retained graph not found: {leak}"
    assert "host-leak" in dx, f"no host-leak diagnosis: {dx}"
    flat, dx, rep = run(tmp, "plateau", [])
    assert not rep["run"]["leaking_pids"], f"a plateau run reported as leaking: {rep['verdict']} {flat} {dx}"
    assert rep["verdict"]["kind"] in ("no-leak", "undecided"), rep["verdict"]
    assert "host-leak" not in dx, dx
    print("ok: retained graph found as a leak; the plain loop has no leaking process")
