"""plateau's pytest plugin: a test's body run as training steps under the tracer, judged like a training run
(docs/pytest.md).

    @pytest.mark.plateau(steps=200)
    def test_cache_does_not_leak():
        model.predict(batch)

    pytest -p plateau.pytest_plugin            # or installed with the package: the pytest11 entry point
    pytest --plateau                           # every test, not only the marked ones

How a test is traced: the plugin runs the test again in a child, `plateau run -- python -m pytest NODEID`, whose
copy of this plugin calls the test function `steps` times with the same fixture values and plateau.step() after
each call; then it reads `plateau report`'s verdict of that run. The test fails on LEAK, passes on no leak (a
warmup, then flat), and is skipped on "not decided yet", with the steps that would decide (`undecided="fail"` fails
it instead). Nothing needs `plateau run -- pytest` around it, and the parent's memory (collection, other tests,
pytest itself) never mixes into a test's verdict: each test is its own run.

The parent still sets the test's fixtures up and tears them down (pytest does that around the call), but never calls
the test function itself: the child does, with fixtures of its own.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

DEFAULT_STEPS = 200
# The practical threshold (plateau report --flat-rel-per-step): growth under this fraction of the level per call is
# flat. A training run's default (1e-4: +100 % over 10 000 steps) would call a torch test body that keeps 12 KiB per
# call on a 129 MiB heap flat; a body a service calls a million times is judged at +100 % over 100 000 calls.
DEFAULT_FLAT_REL = 1e-5
# The steps judged start at the body's second call: the first does one-time work (imports, lazy initialisation,
# caches keyed by first use). Judged from the first call, that jump reads as the end of a warmup and a cache still
# filling over the next 64 calls is called a leak at step 80; from the second, growth since the first judged step
# is not called a leak before the warmup allowance (100 steps) has passed (docs/verdict.md section 4, rule 2).
DEFAULT_SINCE_STEP = 2
UNDECIDED = ("skip", "fail", "pass")
_NAME = "plateau.pytest_plugin"   # the name `-p` registers this module under


def pytest_addoption(parser):
    g = parser.getgroup("plateau", "plateau: memory growth judged over repeated test bodies")
    g.addoption("--plateau", action="store_true", default=False,
                help="run every test's body as training steps under plateau, not only those marked "
                     "@pytest.mark.plateau")
    g.addoption("--plateau-steps", type=int, default=None, metavar="N",
                help="steps (calls of the test body) per test when the marker names none (default %d)" % DEFAULT_STEPS)
    g.addoption("--plateau-undecided", choices=UNDECIDED, default=None,
                help="what a test whose memory is not decided yet becomes: skip (default), fail or pass")
    g.addoption("--plateau-exe", default=None, metavar="PATH",
                help="the plateau command (default: the one beside this package, else `plateau` on PATH)")
    g.addoption("--plateau-keep", action="store_true", default=False,
                help="keep every test's run directory (by default only those of failed or undecided tests)")
    # the child's side: how many times to call the one test it runs (set by the parent only)
    g.addoption("--plateau-child-steps", type=int, default=0, help=argparse.SUPPRESS)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "plateau(steps=200, undecided='skip', since_step=2, slow_hours=None, flat_rel_per_step=1e-5): run the "
        "test's body `steps` times "
        "as training steps under plateau and fail it when its memory leaks (docs/pytest.md)")


# ------------------------------------------------------------------------------------------------ options

def _bad(text):
    """A marker or option the plugin cannot use: the test fails with that one line."""
    pytest.fail("plateau: " + text, pytrace=False)


def _options(item):
    """The test's plateau options, or None when it is not to be traced."""
    config = item.config
    marker = item.get_closest_marker("plateau")
    if marker is None and not config.getoption("plateau"):
        return None
    kw = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        _bad("%s: @pytest.mark.plateau takes keywords only (steps=200, undecided='skip', "
                                "since_step=N, slow_hours=H), not %r" % (item.nodeid, marker.args))
    unknown = set(kw) - {"steps", "undecided", "since_step", "slow_hours", "flat_rel_per_step"}
    if unknown:
        _bad("%s: @pytest.mark.plateau has no option %s (it takes steps, undecided, since_step, slow_hours, "
             "flat_rel_per_step)" % (item.nodeid, ", ".join(sorted(unknown))))
    steps = kw.get("steps", config.getoption("plateau_steps") or DEFAULT_STEPS)
    undecided = kw.get("undecided", config.getoption("plateau_undecided") or "skip")
    since = kw.get("since_step", DEFAULT_SINCE_STEP)
    slow = kw.get("slow_hours")
    flat_rel = kw.get("flat_rel_per_step", DEFAULT_FLAT_REL)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 2:
        _bad("%s: plateau steps must be an integer >= 2, not %r" % (item.nodeid, steps))
    if undecided not in UNDECIDED:
        _bad("%s: plateau undecided must be one of %s, not %r" % (item.nodeid, UNDECIDED,
                                                                                      undecided))
    if not isinstance(since, int) or isinstance(since, bool) or since < 0 or since >= steps:
        _bad("%s: plateau since_step must be an integer in [0, steps), not %r" % (item.nodeid,
                                                                                                   since))
    if slow is not None and not (isinstance(slow, (int, float)) and slow > 0):
        _bad("%s: plateau slow_hours must be a positive number, not %r" % (item.nodeid, slow))
    if not (isinstance(flat_rel, (int, float)) and 0 < flat_rel < 1):
        _bad("%s: plateau flat_rel_per_step must be a fraction in (0, 1), not %r" % (item.nodeid, flat_rel))
    return {"steps": steps, "undecided": undecided, "since_step": since, "slow_hours": slow, "flat_rel": flat_rel}


def _find_exe(config):
    """The plateau command: --plateau-exe, else the build tree's or the install's beside this package, else PATH."""
    given = config.getoption("plateau_exe")
    if given:
        return given
    here = os.path.dirname(os.path.abspath(__file__))          # .../python/plateau
    for rel in (("..", "..", "cli", "plateau"),                  # build tree: build/python/plateau -> build/cli
                ("..", "..", "..", "..", "bin", "plateau")):     # install: PREFIX/share/plateau/python/plateau
        p = os.path.normpath(os.path.join(here, *rel))
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("plateau")


# ------------------------------------------------------------------------------------------------ the child

def _call_steps(pyfuncitem, steps):
    """The child: the test function `steps` times with the same fixture values, plateau.step() after each."""
    from . import step
    func = pyfuncitem.obj
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    for i in range(steps):
        try:
            result = func(**kwargs)
        except BaseException as e:
            if hasattr(e, "add_note"):
                e.add_note("plateau: raised at step %d of %d" % (i + 1, steps))
            raise
        if hasattr(result, "__await__"):
            result.close() if hasattr(result, "close") else None
            pytest.fail("plateau: %s is a coroutine function: async test bodies are not repeated (make the body a "
                        "plain function that runs its loop)" % pyfuncitem.name, pytrace=False)
        step()


# ------------------------------------------------------------------------------------------------ the parent

def _child_command(item, exe, rundir, steps):
    config = item.config
    cmd = [exe, "run", "--no-report", "--no-live", "-o", rundir, "--", sys.executable, "-m", "pytest",
           "-q", "-p", "no:cacheprovider", "--rootdir", str(config.rootpath), "--plateau-child-steps", str(steps)]
    inipath = getattr(config, "inipath", None)
    if inipath:
        cmd += ["-c", str(inipath)]
    if config.pluginmanager.get_plugin(_NAME) is not None:  # loaded by -p or pytest_plugins, not the entry point
        cmd += ["-p", _NAME]
    # the test by its file's absolute path and its names within it: a node id is relative to the rootdir, which a
    # project file above another argument's path (--plateau-exe's, a pyproject.toml) can move away from the test
    names = item.nodeid.split("::")[1:]
    path = getattr(item, "path", None) or getattr(item, "fspath", None)
    return cmd + ["::".join([str(path)] + names) if path is not None and names else item.nodeid]


def _report(exe, rundir, since_step, slow_hours, flat_rel):
    """(text report, JSON report) of the run, or raises RuntimeError with plateau's message."""
    jpath = os.path.join(rundir, "report.json")
    cmd = [exe, "report", rundir, "--json", jpath, "--flat-rel-per-step", repr(float(flat_rel))]
    if since_step:
        cmd += ["--since-step", str(since_step)]
    if slow_hours:
        cmd += ["--slow-hours", repr(float(slow_hours))]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode != 0:
        raise RuntimeError("plateau report exited %d: %s" % (r.returncode, r.stderr.strip()))
    with open(jpath) as f:
        return r.stdout, json.load(f)


def _stepping_process(rep):
    """The traced process with the most steps (the pytest child): its run-model row, or None."""
    procs = (rep.get("run") or {}).get("processes") or []
    procs = [p for p in procs if p.get("steps")]
    return max(procs, key=lambda p: p["steps"]) if procs else None


def _verdict(rep, steps):
    """(kind, line, more_steps, steps_seen) from the report: kind one of leak, slow-growth, no-leak, undecided,
    no-data."""
    v = rep.get("verdict") or {}
    kind = v.get("kind", "no-data")
    line = v.get("line", "verdict: no data")
    more = None
    pid = v.get("pid")
    for p in rep.get("processes") or []:
        if p.get("pid") == pid and p.get("verdict"):
            more = p["verdict"].get("more_steps")
    row = _stepping_process(rep)
    return kind, line, more, (row or {}).get("steps", 0)


def _run_traced(item, opts):
    config = item.config
    exe = _find_exe(config)
    if not exe:
        pytest.fail("plateau: no plateau command: give --plateau-exe PATH or put plateau on PATH", pytrace=False)
    rundir = tempfile.mkdtemp(prefix="plateau-pytest-")
    keep = config.getoption("plateau_keep")
    try:
        r = subprocess.run(_child_command(item, exe, rundir, opts["steps"]), cwd=str(config.rootpath),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        out = r.stdout
        if r.returncode != 0:
            keep = True
            if r.returncode == 1:  # the test itself failed in the child: its own failure, as pytest printed it
                pytest.fail("the test failed while plateau repeated it (run directory %s):\n%s" % (rundir, out),
                            pytrace=False)
            pytest.fail("plateau: the traced child exited %d (run directory %s):\n%s" % (r.returncode, rundir, out),
                        pytrace=False)
        try:
            text, rep = _report(exe, rundir, opts["since_step"], opts["slow_hours"], opts["flat_rel"])
        except (RuntimeError, OSError, ValueError) as e:
            keep = True
            pytest.fail("plateau: no report of %s: %s" % (rundir, e), pytrace=False)
        kind, line, more, seen = _verdict(rep, opts["steps"])
        item.add_report_section("call", "plateau", text)
        where = "plateau report %s" % rundir
        if kind == "leak":
            keep = True
            pytest.fail("plateau: %s over %d steps of the test body\n(the full report: %s)\n%s" %
                        (line, seen, where, text), pytrace=False)
        if kind in ("undecided", "no-data"):
            keep = True
            total = opts["steps"] + more if more else None
            advice = ("run ~%d more steps: @pytest.mark.plateau(steps=%d)" % (more, total) if more else
                      "more steps would not decide it")
            msg = "plateau: not decided after %d steps of the test body: %s (%s; %s)" % (seen, advice, line, where)
            if opts["undecided"] == "fail":
                pytest.fail(msg, pytrace=False)
            if opts["undecided"] == "skip":
                pytest.skip(msg)
            return
        if kind == "slow-growth":
            item.warn(pytest.PytestWarning("plateau: %s (memory grows over %d steps, too slowly to matter within "
                                           "slow_hours; %s)" % (line, seen, where)))
    finally:
        if not keep:
            shutil.rmtree(rundir, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    child_steps = pyfuncitem.config.getoption("plateau_child_steps")
    if child_steps:
        _call_steps(pyfuncitem, child_steps)
        return True
    opts = _options(pyfuncitem)
    if opts is None:
        return None
    _run_traced(pyfuncitem, opts)
    return True
