#!/usr/bin/env python3
"""Integration: Python frames in sampled stacks (preload/pyframes.c, docs/python-frames.md).

Runs small Python programs with the preload on every CPython it finds (Debian's stripped 3.11 must be there; pyenv's
3.9/3.10/3.11/3.12/3.13 when installed) and reads the traces with plateau-trace-dump:
  - a pure-Python loop: stacks carry its frames innermost first, with the right lines; `plateau report --json` names
    the top growing site by the leaking line, with its source text;
  - a Python thread: its stacks name its own function, the main thread's its own;
  - multiprocessing (fork): every worker's trace defines its own pyframe records and names the worker's line;
  - PLATEAU_PY_FRAMES=0 records none, =1 at most one per stack;
  - what an interpreter does to a frame reader (py_hostile.py: threads ending, malloc with the GIL released, fork from
    a thread, generators, coroutines, a sub-interpreter, allocation during finalisation), on every CPython found,
    sampling every 4 KiB: same output and exit status as untraced, no hang, the GIL-released malloc named;
  - a C program: no pyframe records;
  - CPythons whose frames are not read (pyenv's 2.7, 3.6-3.8 when installed): the program's output, stderr and exit
    status unchanged, no pyframe records.
Usage: test_pyframes.py PLATEAU TRACE_DUMP PRELOAD TARGETS_BUILD_DIR TARGETS_SOURCE_DIR
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

plateau, dump, preload, targets_build, targets_src = map(os.path.abspath, sys.argv[1:6])
HOME = os.path.expanduser("~")
OLD_PYTHONS = [p for p in (f"{HOME}/.pyenv/versions/{v}/bin/python" for v in ("2.7.18", "3.6.15", "3.7.16", "3.8.18"))
               if os.path.exists(p)]
PYTHONS = ["/usr/bin/python3"] + [p for p in (f"{HOME}/.pyenv/versions/{v}/bin/python3"
                                              for v in ("3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"))
                                              if os.path.exists(p)]


def marked_line(script, mark):
    with open(script) as f:
        for n, line in enumerate(f, 1):
            if "# " + mark in line:
                return n
    raise AssertionError(f"no '# {mark}' in {script}")


def run(tmp, name, argv, env_extra=None):
    d = os.path.join(tmp, name)
    env = dict(os.environ, LD_PRELOAD=preload, PLATEAU_DIR=d, PLATEAU_QUIET="1", PLATEAU_SAMPLE_BYTES="32768")
    env.update(env_extra or {})
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{name}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "plateau:" not in r.stderr, f"{name}: the preload complained:\n{r.stderr}"
    return d, r.stdout


def read_trace(path):
    """pyframes {id: (file, line, func)}, stacks {id: [pyframe ids]}, allocs [(tid, stack id)]"""
    out = subprocess.run([dump, path], capture_output=True, text=True, check=True).stdout
    pyf, stacks, allocs = {}, {}, []
    for line in out.splitlines():
        m = re.search(r" pyframe id=(\d+) (.*):(-?\d+) in (.*)$", line)
        if m:
            pyf[int(m[1])] = (m[2], int(m[3]), m[4])
            continue
        m = re.search(r" stack id=(\d+)(.*)$", line)
        if m:
            stacks[int(m[1])] = [int(x[2:]) for x in m[2].split() if x.startswith("py")]
            continue
        m = re.search(r" host_alloc .* stack=(\d+) tid=(\d+)", line)
        if m:
            allocs.append((int(m[2]), int(m[1])))
    return pyf, stacks, allocs


def frames(pyf, stack):
    return [pyf[i] for i in stack if i in pyf]


def check_loop(tmp, py):
    script = os.path.join(targets_src, "py_grow.py")
    leak = marked_line(script, "LEAK")
    tag = py.replace("/", "_")
    d, _ = run(tmp, "grow" + tag, [py, script, "300"])
    (trace,) = glob.glob(os.path.join(d, "*.pltrace"))
    pyf, stacks, allocs = read_trace(trace)
    want = [s for s in stacks.values() if frames(pyf, s)[:1] and frames(pyf, s)[0][:2] == (script, leak)]
    assert want, f"{py}: no stack whose innermost Python frame is {script}:{leak}: {list(pyf.values())[:40]}"
    fr = frames(pyf, want[0])
    assert fr[0][2] == "train_step", fr
    assert fr[1][0] == script and fr[1][2] == "<module>", f"{py}: caller frame: {fr}"
    # every recorded id resolves
    assert all(i in pyf for s in stacks.values() for i in s), f"{py}: a stack names an undefined pyframe"
    print(f"ok {py}: stacks name py_grow.py:{leak} in train_step <- <module> ({len(pyf)} distinct Python frames)")


def check_report(tmp):
    """The report names the growing list's line. The loop is killed while it runs, as the OOM killer would: a
    short unmarked pure-Python run has no steps to judge by, and its interpreter's teardown would free the list."""
    script = os.path.join(targets_src, "py_grow.py")
    leak = marked_line(script, "LEAK")
    d = os.path.join(tmp, "killed")
    env = dict(os.environ, LD_PRELOAD=preload, PLATEAU_DIR=d, PLATEAU_QUIET="1", PLATEAU_FLUSH_MS="50")
    p = subprocess.Popen(["/usr/bin/python3", script, "100000"], env=env)
    try:
        p.wait(timeout=1.5)
        raise AssertionError("py_grow.py 100000 ended before it was killed")
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    out = os.path.join(tmp, "killed.json")
    r = subprocess.run([plateau, "report", d, "--json", out], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1, 2), r.stderr
    with open(out) as f:
        rep = json.load(f)
    top = rep["run"]["processes"][0]["sites"]["top"][0]
    assert top["python"]["file"] == script and top["python"]["line"] == leak, f"top site {top}"
    assert top["python"]["source"] == "history.append([loss] * 2000)  # LEAK", top["python"]
    assert top["python"]["name"] == f"py_grow.py:{leak} in train_step", top["python"]
    assert top["python"]["share"] > 0.5, top["python"]
    print(f"ok report: top site {top['python']['name']} ({100 * top['python']['share']:.0f}% of the growth)")


with tempfile.TemporaryDirectory(prefix="pl-test-pyframes-") as tmp:
    for py in PYTHONS:
        check_loop(tmp, py)
    check_report(tmp)

    # threads: each thread's stacks carry its own frames
    script = os.path.join(targets_src, "py_threads.py")
    d, _ = run(tmp, "threads", ["/usr/bin/python3", script])
    (trace,) = glob.glob(os.path.join(d, "*.pltrace"))
    pyf, stacks, allocs = read_trace(trace)
    w, m = marked_line(script, "WORKER"), marked_line(script, "MAIN")
    tids = {}
    for tid, sid in allocs:
        fr = frames(pyf, stacks.get(sid, []))
        if fr and fr[0][0] == script and fr[0][1] in (w, m):
            tids.setdefault(fr[0][2], set()).add(tid)
    assert set(tids) == {"worker", "main_loop"}, f"threads: {tids}"
    assert not tids["worker"] & tids["main_loop"], f"one thread named by both functions: {tids}"
    print("ok threads: worker and main loop named on their own threads")

    # multiprocessing workers (fork): each child's trace defines its pyframes and names the worker line
    script = os.path.join(targets_src, "py_mp.py")
    leak = marked_line(script, "LEAK")
    d, _ = run(tmp, "mp", ["/usr/bin/python3", script])
    named = 0
    for trace in sorted(glob.glob(os.path.join(d, "*.pltrace"))):
        pyf, stacks, allocs = read_trace(trace)
        missing = {i for s in stacks.values() for i in s if i not in pyf}
        assert not missing, f"{trace}: stacks name pyframes the trace does not define: {sorted(missing)[:10]}"
        if any(frames(pyf, stacks.get(sid, []))[:1] == [(script, leak, "work")] for _, sid in allocs):
            named += 1
    assert named >= 2, f"multiprocessing: {named} traces name {script}:{leak} (want both workers)"
    print(f"ok multiprocessing: {named} worker traces name py_mp.py:{leak}")

    # hostile interpreter behaviour: same results as untraced, no crash, no hang, the GIL-released malloc named
    script = os.path.join(targets_src, "py_hostile.py")
    nogil = marked_line(script, "NOGIL")
    for py in PYTHONS:
        want = subprocess.run([py, script], capture_output=True, text=True, timeout=120)
        assert want.returncode == 0, want.stderr
        tag = py.replace("/", "_")
        d, out = run(tmp, "hostile" + tag, [py, script], {"PLATEAU_SAMPLE_BYTES": "4096"})
        assert out == want.stdout, f"{py}: output changed under the preload: {out!r} != {want.stdout!r}"
        traces = glob.glob(os.path.join(d, "*.pltrace"))
        assert len(traces) == 2, f"{py}: want the process and its fork child: {traces}"
        named = False
        for trace in traces:
            pyf, stacks, allocs = read_trace(trace)
            named |= any(frames(pyf, stacks.get(sid, []))[:1] == [(script, nogil, "gil_released_malloc")]
                         for _, sid in allocs)
        assert named, f"{py}: no sample names the malloc called with the GIL released ({script}:{nogil})"
        print(f"ok {py}: hostile program unchanged, GIL-released malloc named at line {nogil}")

    # the depth knob
    script = os.path.join(targets_src, "py_grow.py")
    d, _ = run(tmp, "off", ["/usr/bin/python3", script, "300"], {"PLATEAU_PY_FRAMES": "0"})
    pyf, stacks, _ = read_trace(glob.glob(os.path.join(d, "*.pltrace"))[0])
    assert not pyf and stacks and not any(stacks.values()), "PLATEAU_PY_FRAMES=0 still recorded Python frames"
    d, _ = run(tmp, "one", ["/usr/bin/python3", script, "300"], {"PLATEAU_PY_FRAMES": "1"})
    pyf, stacks, _ = read_trace(glob.glob(os.path.join(d, "*.pltrace"))[0])
    assert pyf and max(len(s) for s in stacks.values()) == 1, "PLATEAU_PY_FRAMES=1: more than one frame"
    print("ok PLATEAU_PY_FRAMES=0 and =1")

    # a C program: no Python, no pyframe records
    d, _ = run(tmp, "c", [os.path.join(targets_build, "target_leak")])
    for trace in glob.glob(os.path.join(d, "*.pltrace")):
        pyf, stacks, _ = read_trace(trace)
        assert stacks and not pyf and not any(stacks.values()), "a C program got Python frames"
    print("ok C program: no Python frames")

    # interpreters whose frames are not read: run as without the preload, native stacks only
    prog = ("import sys\nkeep = []\nfor i in range(3000):\n    keep.append(bytearray(1000 + i))\n"
            "sys.stdout.write('out %d\\n' % len(keep))\nsys.stderr.write('err\\n')\nsys.exit(3)\n")
    for py in OLD_PYTHONS:
        want = subprocess.run([py, "-c", prog], capture_output=True, text=True, timeout=60)
        d = os.path.join(tmp, "old" + py.replace("/", "_"))
        env = dict(os.environ, LD_PRELOAD=preload, PLATEAU_DIR=d, PLATEAU_QUIET="1", PLATEAU_SAMPLE_BYTES="32768")
        got = subprocess.run([py, "-c", prog], env=env, capture_output=True, text=True, timeout=60)
        own = [l for l in got.stderr.splitlines(True) if not l.startswith("plateau:")]
        assert (got.returncode, got.stdout, "".join(own)) == (want.returncode, want.stdout, want.stderr), \
            f"{py}: changed under the preload: {got.returncode} {got.stdout!r} {got.stderr!r}"
        (trace,) = glob.glob(os.path.join(d, "*.pltrace"))
        pyf, stacks, _ = read_trace(trace)
        assert stacks and not pyf and not any(stacks.values()), f"{py}: Python frames recorded"
        print(f"ok {py}: unchanged under the preload, no Python frames")
