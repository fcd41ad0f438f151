#!/usr/bin/env python3
"""Start-up cost of plateau's Python bootstrap (python/boot/sitecustomize.py): interleaved runs of one command with
and without the bootstrap directory (PYTHON_DIR/boot) first on PYTHONPATH (and with it there but PLATEAU_PYTHON=0),
no tracer preloaded, so only the bootstrap is measured. Prints per-variant median and min wall time and the paired median difference.
Usage: bench/python_bootstrap.py PYTHON_DIR N PYTHON [ARGS...]   e.g. build/python 200 /usr/bin/python3 -c pass
"""
import os
import resource
import statistics
import subprocess
import sys
import time

pydir, n, cmd = os.path.join(sys.argv[1], "boot"), int(sys.argv[2]), sys.argv[3:]
base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",) and not k.startswith("PLATEAU_")}
variants = {"none": dict(base), "bootstrap": dict(base, PYTHONPATH=os.path.abspath(pydir)),
            "PLATEAU_PYTHON=0": dict(base, PYTHONPATH=os.path.abspath(pydir), PLATEAU_PYTHON="0")}
times = {k: [] for k in variants}
cpu = {k: [] for k in variants}
for i in range(n + 3):
    order = list(variants) if i % 2 == 0 else list(reversed(list(variants)))
    for k in order:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, env=variants[k], stdout=subprocess.DEVNULL, check=True)
        dt = time.perf_counter() - t
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if i >= 3:  # first rounds warm the page cache
            times[k].append(dt)
            cpu[k].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
print("command: %s; %d interleaved runs per variant; load average %.1f; PYTHONDONTWRITEBYTECODE=%s" % (
    " ".join(cmd), n, os.getloadavg()[0], os.environ.get("PYTHONDONTWRITEBYTECODE", "")))
for k in variants:
    v, c = times[k], cpu[k]
    d = [a - b for a, b in zip(v, times["none"])]
    dc = [a - b for a, b in zip(c, cpu["none"])]
    print("  %-17s wall median %6.2f ms, min %6.2f ms, paired median diff %+5.2f ms | CPU median %6.2f ms, "
          "paired median diff %+5.2f ms" % (k, statistics.median(v) * 1e3, min(v) * 1e3, statistics.median(d) * 1e3,
                                             statistics.median(c) * 1e3, statistics.median(dc) * 1e3))
