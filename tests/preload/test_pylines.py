#!/usr/bin/env python3
"""Unit: preload/pylines.c's line-table decoders (the frame reader's lines, docs/python-frames.md) against CPython's
own decoding, on every CPython 3.9+ found (pyenv's 3.9.18, 3.10.13, 3.11.7, 3.12.1, 3.13.0; Debian's python3).

Each interpreter compiles a few standard-library modules and a generated module with long jumps (a line 300 lines
after the previous one, 1,000 constants between two lines: the tables' extended entries), walks every code object,
and writes its table with the line of every instruction as CPython computes it: co_lines() on 3.10+ (None: no line),
dis.findlinestarts() on 3.9. The helper (pylines_check) decodes the same tables. 3.11+ tables: only instructions
with a line are compared (the reader keeps the previous line for "no location", as the report prefers a line).
Usage: test_pylines.py PYLINES_CHECK
"""
import glob
import os
import subprocess
import sys

check = sys.argv[1]
HOME = os.path.expanduser("~")
PYTHONS = [p for p in ["/usr/bin/python3"] + [f"{HOME}/.pyenv/versions/{v}/bin/python3"
                                                for v in ("3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")]
           if os.path.exists(p)]

GEN = r'''
import dis, importlib.util, sys
v = sys.version_info[:2]
fmt = "lnotab" if v < (3, 10) else "310" if v < (3, 11) else "locations"
srcs = []
for m in ("argparse", "inspect", "typing", "tarfile", "difflib"):
    path = importlib.util.find_spec(m).origin
    srcs.append((open(path, encoding="utf-8").read(), path))
far = "def far(a):\n    x = a\n" + "\n" * 300 + "    y = [" + ", ".join(str(i) + ".5" for i in range(1000)) + \
      "]\n    try:\n        return x + y[0]\n    finally:\n        x = None\n"
srcs.append((far, "<far>"))
none = 0
def walk(co):
    global none
    if v < (3, 10):
        table = co.co_lnotab
        starts = list(dis.findlinestarts(co))
        lines, i, line = [], 0, co.co_firstlineno
        for off in range(0, len(co.co_code), 2):
            while i < len(starts) and starts[i][0] <= off:
                line = starts[i][1]
                i += 1
            lines.append((off // 2, line))
        lines.append((-1, co.co_firstlineno))
    else:
        table = co.co_linetable
        lines = []
        for start, end, line in co.co_lines():
            for off in range(start, end, 2):
                if line is None:
                    none += 1
                    if fmt == "locations":
                        continue
                lines.append((off // 2, -1 if line is None else line))
    if lines:
        print(fmt, co.co_firstlineno, table.hex() or "-", " ".join("%d:%d" % x for x in lines))
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            walk(c)
for src, name in srcs:
    walk(compile(src, name, "exec"))
sys.stderr.write("%s %d no-line\n" % (fmt, none))
'''

for py in PYTHONS:
    gen = subprocess.run([py, "-c", GEN], capture_output=True, text=True, timeout=120)
    assert gen.returncode == 0, f"{py}: {gen.stderr}"
    fmt, n_none = gen.stderr.split()[:2]
    r = subprocess.run([check], input=gen.stdout, capture_output=True, text=True, timeout=120)
    print(f"{py} ({fmt} tables, {n_none} instructions without a line): {r.stdout.strip()}")
    assert r.returncode == 0, f"{py}: the decoder disagrees with CPython:\n{r.stdout}{r.stderr}"
    assert int(r.stdout.split()[1].rstrip(",")) > 10000, r.stdout
    if fmt == "310":
        assert int(n_none) > 0, "3.10: no instruction without a line was checked"
assert PYTHONS, "no CPython found"
