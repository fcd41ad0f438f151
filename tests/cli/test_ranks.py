#!/usr/bin/env python3
"""Integration (issue 15): a real two-rank data-parallel run, `torchrun --nproc_per_node 2` with the gloo backend
on CPU (tests/targets/torch_ranks.py: DistributedDataParallel, SGD), under `plateau run`.

  leak:    only rank 1 keeps a 1 MiB tensor per step: the run verdict is "LEAK in rank 1 (pid P, node N)", the
           report has one row per rank (rank, local rank, node, pid), rank 1 leaks, rank 0 is flat, and the ranks
           are said to disagree (a leak on one rank only);
  healthy: no rank keeps anything: no leak, no leaking rank.

Debian's torchrun (torch 1.13) fails on Python 3.11 before it starts a worker (`to_map`: Std.from_str("0") is None
because 3.11's IntFlag iteration skips the zero member); `--redirects 1 --tee 1 --log_dir DIR` avoids that value
and changes nothing else of the launch (docs/verdict.md section 9). Needs /usr/bin/python3 with python3-torch.
Usage: test_ranks.py PLATEAU TORCH_RANKS_PY
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

plateau, script = sys.argv[1], sys.argv[2]
PY = "/usr/bin/python3"


def run(tmp, name, extra):
    d = os.path.join(tmp, name)
    cmd = [plateau, "run", "--no-report", "-o", d, "--", PY, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node", "2", "--redirects", "1", "--tee", "1", "--log_dir", os.path.join(tmp, name + "-logs"),
           script] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{name}: plateau run exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    for rank in (0, 1):
        assert f"rank {rank} done" in r.stdout, f"{name}: rank {rank} did not finish\n{r.stdout}\n{r.stderr}"
    js = d + ".json"
    r = subprocess.run([plateau, "report", d, "--json", js], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{name}: plateau report exited {r.returncode}\n{r.stderr}"
    print(f"--- {name}\n{r.stdout}")
    with open(js) as f:
        return r.stdout, json.load(f)


def rows_ok(name, rep):
    rk = rep["run"]["ranks"]
    assert rk is not None and rk["n_ranks"] == 2 and rk["n_nodes"] == 1, f"{name}: {rk}"
    rows = rk["rows"]
    assert [r["rank"] for r in rows] == [0, 1], f"{name}: {rows}"
    assert [r["local_rank"] for r in rows] == [0, 1], f"{name}: {rows}"
    host = socket.gethostname()[:63]
    assert all(r["node"] == host for r in rows), f"{name}: node is not {host!r}: {rows}"
    assert len({r["pid"] for r in rows}) == 2, f"{name}: {rows}"
    return rk


with tempfile.TemporaryDirectory(prefix="pl-test-ranks-") as tmp:
    text, rep = run(tmp, "leak", ["--leak-rank", "1", "--leak-kib", "1024", "--steps", "200"])
    rk = rows_ok("leak", rep)
    r1 = rk["rows"][1]
    first = text.splitlines()[0]
    want = f"verdict: LEAK in rank 1 (pid {r1['pid']}, node {r1['node']}): +"
    assert first.startswith(want), f"leak: the verdict does not name rank 1: {first!r}, want {want!r}"
    assert r1["verdict"] == "leak" and r1["metric"] in ("heap.bytes", "tensors"), f"leak: {r1}"
    assert rk["rows"][0]["verdict"] == "no-leak", f"leak: rank 0 is not flat: {rk['rows'][0]}"
    assert rk["leaking"] == [1] and rk["flat"] == [0] and rk["agree"] is False, f"leak: {rk}"
    assert "ranks disagree: rank 1 grows" in text and "while rank 0 is flat: a leak on one rank only" in text, text
    assert rep["run"]["leaking_pids"] == [r1["pid"]], rep["run"]["leaking_pids"]

    text, rep = run(tmp, "healthy", ["--steps", "120"])
    rk = rows_ok("healthy", rep)
    assert rep["verdict"]["kind"] == "no-leak", f"healthy: {rep['verdict']['line']}"
    assert rk["leaking"] == [] and rep["run"]["leaking_pids"] == [], f"healthy: {rk}"
    assert "LEAK" not in text, text
print("OK")
