#!/usr/bin/env python3
"""Integration: unmodified PyTorch CPU scripts (no step markers, nothing of ours imported) under `plateau run`, one
per leak pattern (tests/targets/py_torch_*.py): each report's top growing site must be the script's own line that
allocates what leaks (a line marked `# LEAK`), named `file:line in function` with its source text, and the text
report must say so; the script that leaks nothing must name no leaking process.
Usage: test_torch_sites.py PLATEAU TARGETS_SOURCE_DIR [PATTERN...]
"""
import json
import os
import subprocess
import sys
import tempfile

plateau, targets = sys.argv[1], os.path.abspath(sys.argv[2])
PY = "/usr/bin/python3"
LEAKS = sys.argv[3:] or ["total_loss", "append", "self", "stats", "cache", "late"]


def marked_lines(script):
    """{line number: source text} of the lines marked `# LEAK` (a leak may keep what several lines allocate)"""
    with open(script) as f:
        marked = {n: line.strip() for n, line in enumerate(f, 1) if "# LEAK" in line}
    assert marked, f"no '# LEAK' in {script}"
    return marked


def run(tmp, name):
    script = os.path.join(targets, f"py_torch_{name}.py")
    d = os.path.join(tmp, name)
    r = subprocess.run([plateau, "run", "--no-report", "-o", d, "--", PY, script], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"{name}: plateau run exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    out = os.path.join(tmp, name + ".json")
    r = subprocess.run([plateau, "report", d, "--json", out], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), f"{name}: plateau report exited {r.returncode}\n{r.stderr}"
    text = subprocess.run([plateau, "report", d], capture_output=True, text=True, timeout=120).stdout
    with open(out) as f:
        return script, json.load(f), text


failures = []
with tempfile.TemporaryDirectory(prefix="pl-test-torch-sites-") as tmp:
    for name in LEAKS:
        script, rep, text = run(tmp, name)
        marked = marked_lines(script)
        # the script's own process: a run may hold short-lived helpers too (ldconfig, uname from imports)
        proc = max((p for p in rep["run"]["processes"] if script in p["argv"]), key=lambda p: p["records"])
        row = next(p for p in rep["processes"] if p["pid"] == proc["pid"])
        verdicts = {m["name"]: m["verdict"] for m in row["metrics"]}
        top = (proc["sites"] or {}).get("top") or [{}]
        py = top[0].get("python") or {}
        got = f"{os.path.basename(py.get('file', '?'))}:{py.get('line')} ({py.get('share', 0):.0%})"
        line = py.get("line")
        ok = (verdicts.get("heap.bytes") == "leak" or verdicts.get("heap.count") == "leak") and \
            py.get("file") == script and line in marked and py.get("source") == marked[line] and \
            f"of it allocated at py_torch_{name}.py:{line}" in text
        # the headline and the diagnosis name the line too (issue 14: "the diagnosis names the line")
        head = text.splitlines()[0] if text else ""
        ok = ok and head.startswith("verdict: LEAK") and f"allocated at py_torch_{name}.py:{line}" in head and \
            any(f"allocated at py_torch_{name}.py:{line}" in f["text"] and f["code"] == "host-leak"
                for f in row.get("diagnosis", []))
        print(f"{'ok' if ok else 'FAIL'} {name}: top site {got}, want :{'/'.join(map(str, marked))}; heap verdicts "
              f"{verdicts.get('heap.bytes')}/{verdicts.get('heap.count')}")
        if not ok:
            failures.append(name)
            print(text)
            keep = os.environ.get("PL_KEEP_FAILED")  # a directory to copy the failing run into, for a look
            if keep:
                import shutil
                shutil.copytree(os.path.join(tmp, name), os.path.join(keep, f"{name}-{os.getpid()}"))
    if not sys.argv[3:]:
        script, rep, text = run(tmp, "flat")
        leaking = rep["run"]["leaking_pids"]
        print(f"{'ok' if not leaking else 'FAIL'} flat: leaking pids {leaking}")
        if leaking:
            failures.append("flat")
            print(text)
assert not failures, f"failed: {failures}"
