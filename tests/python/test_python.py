#!/usr/bin/env python3
"""The python.* tests: plateau's Python bootstrap, optimizer steps and the `plateau` package (docs/python.md).

Usage: test_python.py MODE [ARGS]   (meson passes the paths in the environment, see tests/python/meson.build)
  steps N [--explicit] [TRAIN ARGS]  tests/python/train.py (unmodified torch) under plateau run: the report's step
                                     count is exactly N; the trace's steps are optimizer steps (or, with --explicit,
                                     the program's own plateau_step() calls, counted once)
  sitecustomize                      a program with its own sitecustomize on PYTHONPATH: it still runs; steps exact
  disabled                           PLATEAU_PYTHON=0: no bootstrap, no optimizer steps
  notes                              plateau's notes reach plateau run's stderr, never the program's: Python 3.10
                                     children's stderr captured by their parent is exactly untraced; a malformed
                                     PLATEAU_TENSOR_BUDGET is said once
  own_modules                        the program's own plateau.py, plateau package on PYTHONPATH and script-dir
                                     sitecustomize.py are what it imports, exactly as untraced, on every
                                     interpreter found (2.7, 3.6 ... 3.13), and the names at start are the same
  exec_env                           subprocess.run(["/usr/bin/env"], env={...}) prints exactly its untraced bytes,
                                     with an explicit and with the inherited environment; both children are traced
  fork_step                          40 children forked while another thread steps an optimizer each step once
                                     and exit: all 40 finish under plateau run
  env                                what plateau run gives Python children: PYTHONPATH, spawn workers, -m, -I
  steps_pythons                      every CPython 3.7+ found (pyenv 3.9, 3.10 ... 3.13, Debian's 3.11) under plateau
                                     run with a fake torch >= 2 whose optimizer calls its global post-step hooks: the
                                     bootstrap loads and the trace has one optimizer step per step() (no real torch:
                                     pyenv's interpreters have none)
  unit                               the step rule, the import watch, the torch hooks (fakes), the sitecustomize
                                     chain on every interpreter found (pyenv 2.7, 3.6 ... 3.13): no torch needed
  package                            pip install ./python in a fresh venv; step/mark outside plateau (one note);
                                     the callbacks against duck-typed trainers under plateau run mark steps
  torch_counters                     a scripted stand-in torch.cuda (tests/python/cuda_standin.py): allocated growing
                                     is a device leak, reserved growing with allocated flat fragmentation (tune
                                     hint), retries/OOMs said, flat counters nothing
  torch_allocator                    plateau.torch.use_allocator() over a stand-in torch >= 2.0 (tests/python/torch2)
                                     and the CUDA driver double: tensors through our entry points, memory_stats,
                                     the report's device series, the refusals, outside plateau run, torch 1.13
  tensors                            live tensors per step (PLATEAU_TENSOR_BUDGET=1), a tensor leak found, the
                                     default budget counting rarely
  autograd [N]                       `total_loss += loss` on a real loop: the autograd metric leaks (+12 nodes/step),
                                     LEAK, retained graphs named; `loss.item()`: flat; N runs each (default 5)
  callbacks_real                     the callbacks are the real frameworks' types; a real transformers Trainer
                                     (tests/python/hf_trainer.py) gets exact steps and marks
  lightning_real [PACKAGE...]        a real Lightning Trainer, 1.x and 2.x (tests/python/lightning_trainer.py), with
                                     and without accumulate_grad_batches: exact steps from the bootstrap alone; with
                                     plateau.LightningCallback() the same steps and marks around each validation;
                                     PACKAGEs: the Lightnings to import (pytorch_lightning lightning.pytorch)
  judge_lightning                    plateau judge on metrics.csv files that Lightning 2's own CSVLogger wrote in a
                                     tiny real Trainer run (tests/python/lightning_csv.py): a warmup then flat reads
                                     "no leak (warmup 40 steps, then flat)", a warmup then +3 MB/step LEAK (exit 3)
  accelerate_real                    a single-process accelerate loop (tests/python/accelerate_train.py), with and
                                     without gradient accumulation: exact steps from the bootstrap alone
  framework_venv                     tests/python/framework-venv.sh without an index (no network) or without torch:
                                     exit 0, no half venv, one line naming the problem; the *_real tests then skip
                                     and print it
                                     The *_real tests run the interpreter PL_FRAMEWORK_PYTHON names, else the venv
                                     `make framework-venv` makes (PL_FRAMEWORK_VENV, tests/python/frameworks.txt),
                                     else PL_TORCH_PYTHON (Debian's python3); they skip, with the reason, where
                                     the framework does not import or PL_TORCH_PYTHON does not exist. torch2.*
                                     runs callbacks_real and lightning_real with both naming the torch 2 venv there
Exit 77 = skipped (the reason is printed).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

PLATEAU = os.environ["PL_PLATEAU"]
TRACE_STEPS = os.environ.get("PL_TRACE_STEPS", "")
SRC = os.environ["PL_SRC"]                # source root
PYDIR = os.environ["PL_PYTHON_DIR"]       # build/python: boot/sitecustomize.py and the plateau package
BOOT = os.path.join(PYDIR, "boot")        # what plateau run puts on PYTHONPATH
PRIVATE = "_plateau_bootstrap"            # the name the bootstrap loads the package under
TORCH_PY = os.environ.get("PL_TORCH_PYTHON", "/usr/bin/python3")
TRAIN = os.path.join(SRC, "tests", "python", "train.py")
SKIP = 77


def need_torch():
    if not os.path.exists(TORCH_PY):  # the torch2.* reuse of these modes: a venv that `make test-torch2` did not make
        failed = os.path.dirname(os.path.dirname(TORCH_PY)) + ".failed"
        why = open(failed).read().strip() if os.path.exists(failed) else "not made"
        print(f"skip: no {TORCH_PY} ({why})")
        sys.exit(SKIP)
    r = subprocess.run([TORCH_PY, "-c", "import torch"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"skip: {TORCH_PY} cannot import torch: {r.stderr.strip().splitlines()[-1:]}")
        sys.exit(SKIP)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLATEAU_") and k != "PYTHONPATH"}
    env.update(extra)
    return env


def plateau_run(tmp, name, cmd, env=None, check=True):
    d = os.path.join(tmp, name)
    r = subprocess.run([PLATEAU, "run", "--no-report", "-o", d, "--"] + cmd, capture_output=True, text=True,
                       timeout=240, env=env if env is not None else clean_env())
    if check:
        assert r.returncode == 0, f"{name}: plateau run exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return d, r


def traces(d, script):
    """trace_steps' line for each trace of d whose argv names `script`."""
    files = sorted(glob.glob(os.path.join(d, "*.pltrace")))
    out = subprocess.run([TRACE_STEPS] + files, capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    return [row for row in rows if any(script in a for a in row["argv"])]


def report_steps(tmp, d, script):
    """The step count `plateau report --json` gives the process running `script` (and whether detection made it)."""
    j = d + ".json"
    r = subprocess.run([PLATEAU, "report", d, "--json", j], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"plateau report exited {r.returncode}\n{r.stderr}"
    with open(j) as f:
        rep = json.load(f)
    procs = [p for p in rep["run"]["processes"] if script in p["argv"]]
    assert len(procs) == 1, f"expected one process running {script}: {rep['run']['processes']}"
    pid = procs[0]["pid"]
    return procs[0]["steps"], f"pid {pid}: steps auto-detected" in r.stdout


def check_steps(tmp, name, n, args, env=None, explicit=False):
    d, r = plateau_run(tmp, name, [TORCH_PY, TRAIN, "--steps", str(n)] + args, env=env)
    print(r.stdout.strip())
    steps, detected = report_steps(tmp, d, "train.py")
    assert not detected, f"{name}: the report fell back to period detection"
    assert steps == n, f"{name}: the report has {steps} steps, the script made {n} optimizer steps"
    (row,) = traces(d, "train.py")
    if explicit:  # the first optimizer step is recorded before the program's first plateau_step(), which joins it
        assert row["steps_optimizer"] == 1 and row["steps_api"] == n - 1, f"{name}: {row}"
    else:
        assert row["steps_optimizer"] == n and row["steps_api"] == 0, f"{name}: {row}"
    print(f"ok: {name}: {steps} steps for {n} optimizer steps ({row['steps_optimizer']} from the optimizer hook)")


def mode_steps(argv):
    need_torch()
    n = int(argv[0])
    explicit = "--explicit" in argv
    with tempfile.TemporaryDirectory(prefix="pl-py-steps-") as tmp:
        check_steps(tmp, "steps", n, argv[1:], explicit=explicit)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


USER_SITE = """import os
path = os.environ.get("PL_TEST_MARKER")
if path:
    with open(path, "a") as f:
        f.write("user sitecustomize ran\\n")
"""


def mode_sitecustomize(argv):
    need_torch()
    with tempfile.TemporaryDirectory(prefix="pl-py-site-") as tmp:
        user = os.path.join(tmp, "user")
        write(os.path.join(user, "sitecustomize.py"), USER_SITE)
        marker = os.path.join(tmp, "marker")
        env = clean_env(PYTHONPATH=user, PL_TEST_MARKER=marker)
        check_steps(tmp, "sitecustomize", 6, [], env=env)
        with open(marker) as f:
            assert f.read() == "user sitecustomize ran\n", "the program's sitecustomize did not run exactly once"
        print("ok: the program's own sitecustomize ran once")


def mode_wheel_layout(argv):
    """The wheel's layout (docs/install.md): the package is the Python directory itself, boot/ inside it, with no
    plateau/ folder. The bootstrap loads that folder as the package: train.py's optimizer steps are exact, and under
    plateau run `import plateau` is the package's __init__.py."""
    need_torch()
    with tempfile.TemporaryDirectory(prefix="pl-py-wheel-") as tmp:
        pkg = os.path.join(tmp, "site", "plateau_profiler")
        shutil.copytree(os.path.join(PYDIR, "plateau"), pkg, ignore=shutil.ignore_patterns("__pycache__"))
        os.makedirs(os.path.join(pkg, "boot"))
        shutil.copy(os.path.join(BOOT, "sitecustomize.py"), os.path.join(pkg, "boot"))
        env = clean_env(PLATEAU_PYTHON_DIR=pkg)
        check_steps(tmp, "wheel", 6, [], env=env)
        d, r = plateau_run(tmp, "import", [TORCH_PY, "-c", "import plateau; print(plateau.__file__)"], env=env)
        assert r.stdout.strip() == os.path.join(pkg, "__init__.py"), f"import plateau gave {r.stdout!r}"
        print("ok: the package as its own Python directory: exact steps, import plateau is the package")


def mode_disabled(argv):
    need_torch()
    with tempfile.TemporaryDirectory(prefix="pl-py-off-") as tmp:
        d, r = plateau_run(tmp, "off", [TORCH_PY, TRAIN, "--steps", "6"], env=clean_env(PLATEAU_PYTHON="0"))
        (row,) = traces(d, "train.py")
        assert row["steps_optimizer"] == 0 and row["steps_api"] == 0, f"PLATEAU_PYTHON=0 still gave steps: {row}"
        print("ok: PLATEAU_PYTHON=0: no optimizer steps")


CHILD = r"""import multiprocessing as mp, os, sys
def probe(q):
    q.put(("_plateau_bootstrap" in sys.modules, "torch" in sys.modules, "ctypes" in sys.modules))
if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=probe, args=(q,))
    p.start()
    spawned = q.get(timeout=60)
    p.join()
    print(repr({"pythonpath": os.environ.get("PYTHONPATH", ""), "main": ("_plateau_bootstrap" in sys.modules,
                "torch" in sys.modules, "ctypes" in sys.modules), "spawn": spawned,
                "public": "plateau" in sys.modules}))
"""


def mode_env(argv):
    with tempfile.TemporaryDirectory(prefix="pl-py-env-") as tmp:
        child = os.path.join(tmp, "child.py")
        write(child, CHILD)
        py = TORCH_PY if os.path.exists(TORCH_PY) else sys.executable

        def probe(name, env, extra=()):
            d, r = plateau_run(tmp, name, [py] + list(extra) + [child], env=env)
            return eval(r.stdout.strip().splitlines()[-1])

        got = probe("on", clean_env(PYTHONPATH="/nonexistent-pl-test"))
        assert got["pythonpath"] == "/nonexistent-pl-test", got  # the program's own (docs/env.md)
        # bootstrap loaded in the program and in its spawn worker; neither torch nor ctypes imported by it, and
        # no module named `plateau` registered (python.own_modules checks the rest of the names)
        assert got["main"] == (True, False, False) and got["spawn"] == (True, False, False), got
        assert got["public"] is False, got
        got = probe("off", clean_env(PLATEAU_PYTHON="0"))
        assert got["pythonpath"] == "" and got["main"][0] is False and got["spawn"][0] is False, got
        got = probe("isolated", clean_env(), ["-I"])  # documented limit: -I ignores PYTHONPATH
        assert got["main"][0] is False, got
        # python -m: site runs before the module
        mod = os.path.join(tmp, "m.py")
        write(mod, "import sys\nprint('_plateau_bootstrap' in sys.modules)\n")
        d, r = plateau_run(tmp, "dash_m2", [py, "-m", "m"], env=clean_env(PYTHONPATH=tmp))
        assert r.stdout.strip() == "True", r.stdout
        print("ok: bootstrap in the program, its spawn worker and -m, PYTHONPATH its own; off with "
              "PLATEAU_PYTHON=0; absent with -I (documented)")


FORK_STEP = r"""import os, sys, threading, time
import torch
p = torch.nn.Parameter(torch.zeros(1000))
opt = torch.optim.SGD([p], lr=0.1)
p.grad = torch.ones(1000)
stop = []
def loop():
    while not stop:
        opt.step()
t = threading.Thread(target=loop, daemon=True)
t.start()
pids = []
for i in range(40):
    pid = os.fork()
    if pid == 0:
        opt.step()
        os._exit(0)
    pids.append(pid)
pending, done, deadline = set(pids), 0, time.time() + 60
while pending and time.time() < deadline:
    for pid in list(pending):
        if os.waitpid(pid, os.WNOHANG)[0]:
            pending.discard(pid)
            done += 1
    time.sleep(0.02)
for pid in pending:  # hung: kill them so the test fails instead of blocking
    os.kill(pid, 9)
    os.waitpid(pid, 0)
stop.append(1)
t.join()  # a thread still stepping while the interpreter exits can make torch abort ("terminate called"), untraced too
print("finished %d of %d" % (done, len(pids)))
"""


def mode_fork_step(argv):
    """One thread steps an optimizer in a loop while the main thread forks 40 children that each step once and
    os._exit(0): all 40 finish under plateau run, as untraced (the bootstrap's lock, held by the stepping thread
    across the call into the tracer at fork time, is a fresh one in each child)."""
    need_torch()
    with tempfile.TemporaryDirectory(prefix="pl-py-fork-") as tmp:
        script = os.path.join(tmp, "fork_step.py")
        write(script, FORK_STEP)
        d, r = plateau_run(tmp, "fork", [TORCH_PY, script])
        assert r.stdout.strip() == "finished 40 of 40", f"children hung in optimizer.step(): {r.stdout}{r.stderr}"
        print("ok: fork_step: 40 of 40 forked children stepped once and exited while another thread stepped")


EXEC_ENV = r"""import subprocess, sys
explicit = sys.argv[1] == "explicit"
r = subprocess.run(["/usr/bin/env"], env={"PATH": "/usr/bin", "X": "1"} if explicit else None,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
sys.stdout.write(r.stdout.decode())
if explicit:  # the program's own LD_PRELOAD (of a library that is not plateau's) is its own too
    r = subprocess.run(["/usr/bin/env"], env={"LD_PRELOAD": "libc.so.6", "Y": "2"}, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    sys.stdout.write(r.stdout.decode())
"""


def mode_exec_env(argv):
    """A child given an explicit environment without plateau's variables, and one inheriting the program's, see
    exactly their untraced environment and print exactly their untraced bytes, and both are traced (docs/env.md,
    "Following children")."""
    py = TORCH_PY if os.path.exists(TORCH_PY) else sys.executable
    with tempfile.TemporaryDirectory(prefix="pl-py-exec-") as tmp:
        script = os.path.join(tmp, "exec_env.py")
        write(script, EXEC_ENV)
        untraced = subprocess.run([py, script, "explicit"], capture_output=True, env=clean_env(), cwd=tmp)
        assert untraced.stdout == b"PATH=/usr/bin\nX=1\nLD_PRELOAD=libc.so.6\nY=2\n", untraced.stdout
        d = os.path.join(tmp, "explicit")
        traced = subprocess.run([PLATEAU, "run", "--no-report", "-o", d, "--", py, script, "explicit"],
                                capture_output=True, env=clean_env(), cwd=tmp, timeout=120)
        assert traced.returncode == 0 and traced.stdout == untraced.stdout, \
            f"explicit environment: {traced.stdout!r} != {untraced.stdout!r}\n{traced.stderr!r}"
        assert len([row for row in traces(d, "env") if row["argv"][:1] == ["/usr/bin/env"]]) == 2, \
            "a child given an explicit environment was not traced"
        untraced = subprocess.run([py, script, "inherited"], capture_output=True, text=True, env=clean_env(),
                                  cwd=tmp)
        d, r = plateau_run(tmp, "inherited", [py, script, "inherited"])
        assert r.stdout == untraced.stdout, f"inherited environment: {r.stdout!r} != {untraced.stdout!r}"
        assert len([row for row in traces(d, "env") if row["argv"][:1] == ["/usr/bin/env"]]) == 1, \
            "a child inheriting the environment was not traced"
        print("ok: exec_env: an explicit and an inherited environment reach the child exactly, both traced")


NOTES_PARENT = r"""import subprocess, sys
for py in sys.argv[1:]:
    r = subprocess.run([py, "-c", "import sys; sys.stderr.write('child err\\n')"], capture_output=True)
    print(repr(r.stderr))
"""


def mode_notes(argv):
    """plateau's notes go to its own channel, never the program's stderr: Python 3.8 and 3.7 children (frames not
    readable there: 3.9 to 3.13 are) whose stderr their parent captures see exactly their untraced bytes, and plateau
    run prints the note once for both; a malformed PLATEAU_TENSOR_BUDGET gets one note too."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    olds = [os.path.join(root, "versions", v, "bin", "python") for v in ("3.8.18", "3.7.16")]
    olds = [p for p in olds if os.path.exists(p)] or sorted(
        glob.glob(os.path.join(root, "versions", "3.[678].*", "bin", "python")))[:1]
    if not olds:
        print("skip: no pyenv Python 3.6-3.8 found")
        sys.exit(SKIP)
    py = TORCH_PY if os.path.exists(TORCH_PY) else sys.executable
    with tempfile.TemporaryDirectory(prefix="pl-py-notes-") as tmp:
        parent = os.path.join(tmp, "parent.py")
        write(parent, NOTES_PARENT)
        untraced = subprocess.run([py, parent] + olds, capture_output=True, text=True, env=clean_env(), timeout=120)
        assert untraced.stdout == "b'child err\\n'\n" * len(olds), untraced.stdout
        d, r = plateau_run(tmp, "frames", [py, parent] + olds)
        assert r.stdout == untraced.stdout, f"the children's captured stderr changed: {r.stdout!r}"
        said = [line for line in r.stderr.splitlines() if "frames are not readable" in line]
        want = "plateau: %s: this Python's frames are not readable" % (
            "%d processes" % len(olds) if len(olds) > 1 else "pid ")
        assert len(said) == 1 and said[0].startswith(want), f"plateau run's stderr: {r.stderr!r}"
        need_torch()
        env = clean_env(PLATEAU_TENSOR_BUDGET="lots")
        untraced = subprocess.run([TORCH_PY, TRAIN, "--steps", "2"], capture_output=True, text=True, env=env)
        d, r = plateau_run(tmp, "budget", [TORCH_PY, TRAIN, "--steps", "2"], env=env)
        assert (r.stdout, untraced.stderr) == (untraced.stdout, ""), (r.stdout, untraced)
        said = [line for line in r.stderr.splitlines() if "PLATEAU_TENSOR_BUDGET" in line]
        assert len(said) == 1 and said[0].endswith("PLATEAU_TENSOR_BUDGET='lots' is not a fraction in [0, 1]; "
                                                   "using the default (0.01)"), r.stderr
        print("ok: notes: the children's captured stderr is their own; plateau run said: " + " | ".join(
            line for line in r.stderr.splitlines() if "pid" in line))


# ---------------------------------------------------------------------------------------------- unit


class FakeOpt(object):
    pass


def unit_rule():
    sys.path.insert(0, PYDIR)
    from plateau import _steps
    _steps._native._funcs = {}  # no tracer: boundaries are only counted

    def run(seq):
        _steps.reset()
        for o in seq:
            _steps.on_step(o)
        return _steps.n_boundaries

    a, b = FakeOpt(), FakeOpt()
    assert run([a] * 5) == 5
    assert run([a, b] * 5) == 5, "GAN: one step per iteration"
    assert run([b, a] * 5) == 5
    assert run(([a] * 5 + [b]) * 3) == 15, "the optimizer stepping most paces (WGAN critic)"
    assert run([a] * 3 + [b] * 4) == 6, "pacing moves to a new optimizer after its second step"
    _steps.reset()
    c = FakeOpt()
    for o in [c, c]:
        _steps.on_step(o)
    del c, o
    import gc
    gc.collect()
    for o in [b, b, b]:
        _steps.on_step(o)
    assert _steps.n_boundaries == 5, "a collected pacer hands over at once"
    _steps.on_step(None)  # never raises, whatever it is given
    print("ok: unit: step rule (one, two, uneven, switched, collected optimizers)")


def unit_hooks():
    import types
    sys.path.insert(0, PYDIR)
    from plateau import _steps
    _steps._native._funcs = {}
    # torch >= 2.0: the global post hook
    hooks = []
    mod = types.SimpleNamespace(register_optimizer_step_post_hook=hooks.append)
    _steps._patched = False
    assert _steps.patch(types.SimpleNamespace(optimizer=mod)) == "global-hook"
    _steps.reset()
    o = FakeOpt()
    hooks[0](o, (), {})
    hooks[0](o, (), {})
    assert _steps.n_boundaries == 2
    # torch 1.13: the profiler entry point every step wrapper calls
    calls = []

    class Optimizer(object):
        def _optimizer_step_code(self):
            calls.append(self)

    class Adam(Optimizer):
        pass

    _steps._patched = False
    assert _steps.patch(types.SimpleNamespace(optimizer=types.SimpleNamespace(Optimizer=Optimizer))) == "step-code"
    _steps.reset()
    x = Adam()
    x._optimizer_step_code()
    x._optimizer_step_code()
    assert calls == [x, x] and _steps.n_boundaries == 2
    # a hook that fails to install is no exception
    _steps._patched = False

    def boom(h):
        raise RuntimeError("no")
    assert _steps.patch(types.SimpleNamespace(optimizer=types.SimpleNamespace(
        register_optimizer_step_post_hook=boom))) is None
    print("ok: unit: torch >= 2 global hook, torch 1.13 _optimizer_step_code, failures swallowed")


FAKE_TORCH = {
    "torch/__init__.py": "from torch import optim as optim\n",
    "torch/optim/__init__.py": "from .optimizer import Optimizer\nfrom . import optimizer\n",
    "torch/optim/optimizer.py": "hooks = []\ndef register_optimizer_step_post_hook(h):\n    hooks.append(h)\n"
                                "class Optimizer(object):\n    pass\n",
}


def unit_watch(tmp):
    fake = os.path.join(tmp, "fake")
    for k, v in FAKE_TORCH.items():
        write(os.path.join(fake, k), v)
    prog = ("import sys\n"
            "w = [f for f in sys.meta_path if type(f).__name__ == '_Watch']\n"
            "assert len(w) == 1 and sys.meta_path[0] is w[0], sys.meta_path\n"
            "assert 'torch' not in sys.modules and 'ctypes' not in sys.modules\n"
            "import json\n"  # an unrelated import goes through untouched
            "import torch\n"
            "from importlib.machinery import SourceFileLoader\n"
            "assert type(torch.optim.__loader__) is SourceFileLoader, torch.optim.__loader__\n"
            "assert type(torch.optim.__spec__.loader) is SourceFileLoader\n"
            "assert not [f for f in sys.meta_path if type(f).__name__ == '_Watch'], 'watch not removed'\n"
            "assert len(torch.optim.optimizer.hooks) == 1, 'step hook not installed'\n"
            "print('watch ok')\n")
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                       env=clean_env(PYTHONPATH=BOOT + ":" + fake))
    assert r.returncode == 0 and r.stdout.strip() == "watch ok", f"import watch: {r.stdout}\n{r.stderr}"
    print("ok: unit: the import watch hooks torch.optim on import, leaves its real loader, removes itself")


def interpreters():
    found = [sys.executable]
    if os.path.exists("/usr/bin/python3"):
        found.append("/usr/bin/python3")
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for exe in sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python"))):
        found.append(exe)
    return found


def unit_chain(tmp):
    user = os.path.join(tmp, "user")
    write(os.path.join(user, "sitecustomize.py"), USER_SITE)
    bad = os.path.join(tmp, "bad")
    write(os.path.join(bad, "sitecustomize.py"), "raise ValueError('boom from the program sitecustomize')\n")
    prog = ("import sys; m = sys.modules.get('sitecustomize'); "
            "print('%s %s' % ('_plateau_bootstrap' in sys.modules, getattr(m, '__file__', None)))")
    seen = []
    for i, py in enumerate(interpreters()):
        ver = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                             text=True)
        if ver.returncode != 0:
            continue
        v = tuple(int(x) for x in ver.stdout.split("."))
        marker = os.path.join(tmp, "marker-%d" % i)
        r = subprocess.run([py, "-c", prog], capture_output=True, text=True,
                           env=clean_env(PYTHONPATH=BOOT + ":" + user, PL_TEST_MARKER=marker, PLATEAU_DEBUG="1"))
        assert r.returncode == 0 and r.stderr == "", f"{py}: {r.returncode} {r.stderr}"
        loaded, site = r.stdout.split()
        assert loaded == str(v >= (3, 7)), f"{py}: bootstrap loaded: {loaded}"
        assert os.path.realpath(site.rstrip("c")) == os.path.realpath(os.path.join(user, "sitecustomize.py")), \
            f"{py}: sys.modules['sitecustomize'] is {site}, not the program's"
        with open(marker) as f:
            assert f.read() == "user sitecustomize ran\n", f"{py}: the program's sitecustomize did not run once"
        # a failing sitecustomize fails the same way with and without the bootstrap in front of it
        runs = [subprocess.run([py, "-c", "print('main ran')"], capture_output=True, text=True,
                               env=clean_env(PYTHONPATH=pp)) for pp in (bad, BOOT + ":" + bad)]
        assert runs[0].returncode == runs[1].returncode == 0 and runs[0].stdout == runs[1].stdout == "main ran\n"
        assert runs[0].stderr == runs[1].stderr and "sitecustomize" in runs[1].stderr, \
            f"{py}: {runs[0].stderr!r} != {runs[1].stderr!r}"
        seen.append("%d.%d" % v)
    assert seen, "no interpreter ran"
    print("ok: unit: sitecustomize chain and failure identical on " + " ".join(seen))


OWN_MAIN = """import sys
import plateau
print("%s %s" % (getattr(plateau, "VALUE", "shadowed"), plateau.step()))
"""
SITE_MAIN = """import sys
print("main: sitecustomize loaded at start: %s" % ("sitecustomize" in sys.modules))
try:
    import sitecustomize
    print("main: import sitecustomize: %s" % getattr(sitecustomize, "__file__", None))
except ImportError as e:
    print("main: import sitecustomize: %s: %s" % (type(e).__name__, e))
"""
NAMES = """import sys
print(" ".join(sorted(n for n in sys.modules if not n.startswith("_plateau_bootstrap"))))
"""


def own_modules_on(py, tmp, v):
    """On one interpreter: what the program imports and prints with BOOT in front of PYTHONPATH is exactly what it
    does without it: its own plateau.py, its own plateau package on PYTHONPATH, its script directory's
    sitecustomize.py (imported by the program), no sitecustomize at all, the modules registered at start."""
    d = os.path.join(tmp, "v%d%d" % v)
    write(os.path.join(d, "own", "plateau.py"), 'VALUE = "own"\ndef step():\n    return "user step"\n')
    write(os.path.join(d, "own", "main.py"), OWN_MAIN)
    write(os.path.join(d, "pp", "plateau", "__init__.py"), 'VALUE = "pp"\ndef step():\n    return "pp step"\n')
    write(os.path.join(d, "main_pp.py"), OWN_MAIN)
    write(os.path.join(d, "site", "sitecustomize.py"), 'print("script-dir sitecustomize ran")\n')
    write(os.path.join(d, "site", "main.py"), SITE_MAIN)
    write(os.path.join(d, "bare", "main.py"), SITE_MAIN)
    write(os.path.join(d, "names.py"), NAMES)
    cases = [("own plateau.py", [os.path.join(d, "own", "main.py")], None, "own user step\n"),
             ("plateau package on PYTHONPATH", [os.path.join(d, "main_pp.py")], os.path.join(d, "pp"),
              "pp pp step\n"),
             ("script-dir sitecustomize", [os.path.join(d, "site", "main.py")], None, "main: import sitecustomize"),
             ("no sitecustomize", [os.path.join(d, "bare", "main.py")], None, "main: import sitecustomize"),
             ("module names", [os.path.join(d, "names.py")], None, "sys")]
    for name, args, pp, expect in cases:
        runs = [subprocess.run([py] + args, capture_output=True, text=True, cwd=d, timeout=60,
                               env=clean_env(**({"PYTHONPATH": ":".join(x for x in (boot, pp) if x)}
                                                if boot or pp else {})))
                for boot in (None, BOOT)]
        untraced, traced = ((r.returncode, r.stdout, r.stderr) for r in runs)
        assert expect in untraced[1], f"{py}: {name}: the untraced run itself is not what the test expects: {untraced}"
        assert traced == untraced, f"{py}: {name}: with the bootstrap {traced} != without {untraced}"
    # where the program has no plateau of its own, the public API is plateau's (Python >= 3.7: the bootstrap's)
    if v >= (3, 7):
        r = subprocess.run([py, "-c", "import plateau, sys; print(plateau.__file__); print(plateau.TrainerCallback, "
                            "plateau.torch.use_allocator, plateau.step, plateau.mark); print('plateau._steps' in "
                            "sys.modules)"], capture_output=True, text=True, cwd=d, timeout=60,
                           env=clean_env(PYTHONPATH=BOOT))
        out = r.stdout.splitlines()
        assert r.returncode == 0 and os.path.realpath(out[0]) == os.path.realpath(
            os.path.join(PYDIR, "plateau", "__init__.py")), f"{py}: {r.stdout}{r.stderr}"
        assert out[2] == "False", f"{py}: the public plateau installed a second step hook: {r.stdout}"


def mode_own_modules(argv):
    """The program's own modules are never replaced by the bootstrap's (docs/python.md): on every interpreter
    found (2.7, 3.6 ... 3.13), and under plateau run with Debian's python3."""
    seen = []
    with tempfile.TemporaryDirectory(prefix="pl-py-own-") as tmp:
        for py in interpreters():
            ver = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True)
            if ver.returncode != 0:
                continue
            v = tuple(int(x) for x in ver.stdout.split("."))
            own_modules_on(py, tmp, v)
            seen.append("%d.%d" % v)
        py = TORCH_PY if os.path.exists(TORCH_PY) else sys.executable
        own = os.path.join(tmp, "run", "own")
        write(os.path.join(own, "plateau.py"), 'VALUE = "own"\ndef step():\n    return "user step"\n')
        write(os.path.join(own, "main.py"), OWN_MAIN)
        r = subprocess.run([PLATEAU, "run", "--no-report", "-o", os.path.join(tmp, "run", "d"), "--", py, "main.py"],
                           capture_output=True, text=True, cwd=own, timeout=120, env=clean_env())
        assert r.returncode == 0 and r.stdout == "own user step\n", f"plateau run: {r.stdout}{r.stderr}"
    print("ok: own_modules: the program's plateau.py, plateau package and sitecustomize.py are its own, and "
          "no name of the bootstrap is registered, on " + " ".join(seen) + "; under plateau run too")


def unit_tensors():
    """_torchstats: the live tensor count (by type, subclasses included, never isinstance) and its time budget."""
    import types
    sys.path.insert(0, PYDIR)
    from plateau import _torchstats as ts

    class Tensor(object):
        pass

    class Parameter(Tensor):
        pass

    class Touchy(object):  # isinstance() would read __class__ through this (torch.distributed.reduce_op warns)
        def __getattribute__(self, name):
            raise AssertionError("the count read an attribute of a non-tensor: " + name)

    fake = types.SimpleNamespace(Tensor=Tensor, cuda=types.SimpleNamespace(is_initialized=lambda: False))
    saved = sys.modules.get("torch")
    sys.modules["torch"] = fake
    try:
        keep = [Tensor() for _ in range(7)] + [Parameter() for _ in range(3)] + [[Touchy()]]
        assert ts.count_tensors() == {-1: 10}, ts.count_tensors()
        del keep
        assert ts.count_tensors() == {-1: 0}
        # the budget: a count costing 5 ms at boundaries 1 ms apart, 1 % budget: about one count per 500 ms
        clock = [0.0]
        ts.time = types.SimpleNamespace(perf_counter=lambda: clock[0])
        real_count = ts.count_tensors

        cost = [lambda n: 0.005]  # what the n-th count (from 1) takes

        def slow_count():
            clock[0] += cost[0](ts.n_counts + 1)
            return {-1: 1}
        ts.count_tensors = slow_count
        sent = []

        def run(budget, step_s, n, started, at_s=None):
            """n boundaries step_s apart, the process started `started` s before the first; the counts' boundaries
            (and their times in at_s)."""
            ts._budget, ts._next_count, ts.n_counts, ts.count_seconds = budget, 0.0, 0, 0.0
            ts._boundaries = ts._last_boundary = 0
            ts._costs, ts._debt, ts._charged, ts._t_start = [], 0.0, 0.0, clock[0] - started
            at = []
            for k in range(1, n + 1):
                before = ts.n_counts
                t = clock[0]
                ts.tensors(lambda *a: sent.append(a))
                if ts.n_counts > before:
                    at.append(k)
                    if at_s is not None:
                        at_s.append(t)
                clock[0] += step_s
            return at

        # 2000 boundaries 1 ms apart, 1 % budget, the process just started: the early rule's 5 % of a 2 s run
        # (about 20 counts of 5 ms), not more
        at = run(0.01, 0.001, 2000, 0.0)
        assert 10 <= len(at) <= 22, at
        assert ts.count_seconds <= 0.05 * clock[0] + 0.005, (ts.count_seconds, clock[0])
        assert len(sent) == ts.n_counts and sent[0][0] == ts.SRC_TORCH_TENSORS and sent[0][1] == -1
        # a long run: 40,000 boundaries of 10 ms: the early rule's counts grow with log(steps), and the share of
        # the wall time tends to the budget: under 1.5 % over 400 s
        clock[0] = 0.0
        at = run(0.01, 0.010, 40000, 1.0)
        assert ts.count_seconds <= 0.015 * clock[0], (ts.count_seconds, clock[0])
        # a short run that must be judged: 300 boundaries of 20 ms (torch imported 1 s before): a verdict needs 8
        # points after the 100-step warmup allowance, spread to the end; at most 5 % of the wall time
        clock[0] = 0.0
        at = run(0.01, 0.020, 300, 1.0)
        late = [k for k in at if k > 101]
        assert len(late) >= 8 and at[-1] >= 270 and at[:4] == [1, 2, 3, 4], at
        assert ts.count_seconds <= 0.05 * (clock[0] + 1.0), (ts.count_seconds, clock[0])
        unit_tensor_outlier(ts, clock, cost, run)
        cost[0] = lambda n: 0.005
        ts._budget, ts._next_count, ts.n_counts = 0.0, 0.0, 0  # PLATEAU_TENSOR_BUDGET=0: never
        for _ in range(10):
            ts.tensors(lambda *a: None)
        assert ts.n_counts == 0
        ts.count_tensors = real_count
    finally:
        ts.time = __import__("time")
        ts._budget = ts._t_start = None
        ts._boundaries = ts._last_boundary = 0
        ts._costs, ts._debt, ts._charged = [], 0.0, 0.0
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved
    print("ok: unit: live tensors counted by type (subclasses, no attribute reads); 1 % budget: the early rule's "
          "5 % in a 2 s run, under 1.5 % over 400 s, 8+ counts after step 101 of 300 steps of 20 ms")


def max_gap(times, after):
    """The longest wait for a run (a count, a census) from `after` (the end of the slow one) on: `times` are the
    runs' start times."""
    ts_ = [after] + [t for t in times if t > after]
    return max(b - a for a, b in zip(ts_, ts_[1:]))


def unit_tensor_outlier(ts, clock, cost, run):
    """One slow count (the machine paused it; a passing big heap) does not stop the schedule: the next count is
    priced at a typical count's cost (the median of the recent ones), not the slow one's; its excess is repaid by
    stretching later gaps, at most STRETCH typical ones, so the budget holds over the run."""
    from plateau import _census
    # a long run, 40,000 boundaries of 10 ms, counts of 5 ms (a typical gap: 99 x 5 ms), the 20th count 2 s: priced
    # at its own cost the next steady count came 198 s later
    clock[0] = 0.0
    cost[0] = lambda n: 2.0 if n == 20 else 0.005
    at_s = []
    at = run(0.01, 0.010, 40000, 1.0, at_s)
    gap = max_gap(at_s, at_s[19] + 2.0)
    typical_gap = 0.005 * 99
    assert gap <= _census.STRETCH * typical_gap + 0.010 + 0.005 + 1e-6, (gap, at_s[15:30])
    share = ts.count_seconds / clock[0]
    assert share <= 0.015, (ts.count_seconds, clock[0])
    assert ts._debt == 0.0, ts._debt  # the 2 s repaid
    # a short run that must be judged (300 boundaries of 20 ms, torch imported 1 s before), the 6th count 0.5 s: the
    # early rule priced the next at it, all counts were over its 5 % of the wall time, and none ran after step 6
    clock[0] = 0.0
    cost[0] = lambda n: 0.5 if n == 6 else 0.005
    at = run(0.01, 0.020, 300, 1.0)
    late = [k for k in at if k > 101]
    assert len(late) >= 8 and at[-1] >= 270, at
    assert ts._charged <= 0.05 * (clock[0] + 1.0), (ts._charged, clock[0])
    print("ok: unit: one slow count (2 s among 5 ms ones): the longest gap after it %.2f s (typical %.3f s), "
          "%.2f %% of 400 s; 0.5 s in a 300-step run: %d counts after step 101, the last at step %d"
          % (gap, typical_gap, 100 * share, len(late), at[-1]))


def unit_census_schedule():
    """_census: the census's steady rule has the same pricing (_census.pace): a 3 s census among 20 ms ones leaves
    no gap longer than STRETCH typical ones, and over 1,000 s the censuses take the budget."""
    import types
    sys.path.insert(0, PYDIR)
    from plateau import _census as cs
    clock = [0.0]
    took = [0.020]
    real = cs.census

    def fake_census():
        clock[0] += took[0]
    cs.time = types.SimpleNamespace(perf_counter=lambda: clock[0])
    cs.census = fake_census
    try:
        cs._budget, cs._next, cs._costs, cs._debt, cs.census_seconds = 0.01, 0.0, [], 0.0, 0.0
        at_s = []
        for k in range(100000):  # boundaries 10 ms apart
            took[0] = 3.0 if len(at_s) == 10 else 0.020
            t = clock[0]
            if cs.on_boundary():
                at_s.append(t)
            clock[0] += 0.010
        gap = max_gap(at_s, at_s[10] + 3.0)
        typical_gap = 0.020 * 99
        assert gap <= cs.STRETCH * typical_gap + 0.010 + 0.020 + 1e-6, (gap, at_s[5:20])
        share = cs.census_seconds / clock[0]
        assert cs.census_seconds <= 0.01 * clock[0] + 0.020, (cs.census_seconds, clock[0])
        assert cs._debt == 0.0, cs._debt
    finally:
        cs.time = __import__("time")
        cs.census = real
        cs._budget, cs._next, cs._costs, cs._debt, cs.census_seconds = None, 0.0, [], 0.0, 0.0
    print("ok: unit: census schedule: one 3 s census among 20 ms ones: the longest gap after it %.2f s (typical "
          "%.2f s); %.3f %% of %.0f s" % (gap, typical_gap, 100 * share, clock[0]))


def mode_unit(argv):
    unit_rule()
    unit_hooks()
    unit_tensors()
    unit_census_schedule()
    with tempfile.TemporaryDirectory(prefix="pl-py-unit-") as tmp:
        unit_watch(tmp)
        unit_chain(tmp)


# ---------------------------------------------------------------------------------- torch's counters, tensors

STANDIN = os.path.join(SRC, "tests", "python", "cuda_standin.py")


def run_report(tmp, name, cmd, env=None):
    """plateau run CMD, then the report's JSON row of its one Python process: (row, {metric name: metric})."""
    d, r = plateau_run(tmp, name, cmd, env=env)
    return report_row(d, name)


def report_row(d, name):
    j = d + ".json"
    rr = subprocess.run([PLATEAU, "report", d, "--json", j], capture_output=True, text=True, timeout=120)
    assert rr.returncode == 0, f"{name}: plateau report exited {rr.returncode}\n{rr.stderr}"
    with open(j) as f:
        rep = json.load(f)
    rows = [p for p in rep["processes"] if p["name"].startswith("python")]
    assert len(rows) == 1, f"{name}: {[p['name'] for p in rep['processes']]}"
    return rows[0], {m["name"]: m for m in rows[0]["metrics"]}, rr.stdout


def codes(row):
    return [d["code"] for d in row["diagnosis"]]


def mode_torch_counters(argv):
    """A stand-in torch.cuda (tests/python/cuda_standin.py) whose counters are scripted: the bootstrap's real
    torch.cuda.memory_stats_as_nested_dict() path gives torch's series, judged and diagnosed."""
    need_torch()
    MiB = 1 << 20
    with tempfile.TemporaryDirectory(prefix="pl-py-cuda-") as tmp:
        row, m, out = run_report(tmp, "leak", [TORCH_PY, STANDIN, "--mode", "leak", "--steps", "160"])
        al = m["dev.allocated"]
        assert al["verdict"] == "leak" and al["leak"]["per_step"] == 4 * MiB, al["verdict"]
        assert al["series"][0][:2] == [1, 104 * MiB] and al["last_value"] == 740 * MiB, "values or steps shifted"
        assert m["dev.tensors"]["verdict"] == "leak", m["dev.tensors"]["verdict"]
        oom = al["leak"]["oom"]
        assert oom and abs(oom["limit"] - (16 << 30)) < 1e3, "no projection against the capacity"
        assert "retained-tensors" in codes(row), codes(row)
        print("ok: allocated growing: dev.allocated leak +4 MiB/step, retained tensors, OOM against 16 GiB")

        row, m, out = run_report(tmp, "frag", [TORCH_PY, STANDIN, "--mode", "frag", "--steps", "160"])
        assert m["dev.allocated"]["verdict"] in ("flat", "plateau"), m["dev.allocated"]["verdict"]
        assert m["dev.reserved"]["verdict"] == "leak" and m["dev.inactive_split"]["verdict"] == "leak"
        assert "fragmentation" in codes(row) and not {"retained-tensors", "device-growth"} & set(codes(row)), codes(row)
        text = [d["text"] for d in row["diagnosis"] if d["code"] == "fragmentation"][0]
        assert "reserved grows 2.00 MiB/step" in text, text
        assert "plateau tune" in text and "expandable_segments" in text and "max_split_size_mb" in text, text
        print("ok: reserved growing, allocated flat: fragmentation with the tune hint")

        row, m, out = run_report(tmp, "retries", [TORCH_PY, STANDIN, "--mode", "retries", "--steps", "160"])
        text = [d["text"] for d in row["diagnosis"] if d["code"] == "alloc-retries"]
        assert text and "1 out-of-memory error " in text[0] and "3 allocation retries" in text[0], codes(row)
        assert all(m[k]["verdict"] == "flat" for k in ("dev.allocated", "dev.reserved")), "flat counters judged"
        print("ok: retries and OOMs said: " + text[0][:80] + "...")

        row, m, out = run_report(tmp, "flat", [TORCH_PY, STANDIN, "--mode", "flat", "--steps", "160"])
        bad = {"retained-tensors", "device-growth", "fragmentation", "alloc-retries"} & set(codes(row))
        assert not bad and m["dev.allocated"]["verdict"] == "flat", codes(row)
        print("ok: flat counters: no device finding")

        d, r = plateau_run(tmp, "raises", [TORCH_PY, STANDIN, "--mode", "raises", "--steps", "20"],
                           env=clean_env(PLATEAU_TENSOR_BUDGET="1"))
        assert r.stdout.startswith("cuda_standin.py: 20 steps, mode raises") and "Traceback" not in r.stderr, r.stderr
        row, m, out = run_report(tmp, "raises2", [TORCH_PY, STANDIN, "--mode", "raises", "--steps", "20"],
                                 env=clean_env(PLATEAU_TENSOR_BUDGET="1"))
        assert "dev.allocated" not in m and len(m["tensors"]["series"]) == 20, sorted(m)
        print("ok: memory stats raising: the program runs on unaware, tensors still counted")


def mode_tensors(argv):
    """Live tensors per step on a PyTorch CPU script (PLATEAU_TENSOR_BUDGET=1: a count at every step), a leak of
    tensors found, and the default budget counting rarely."""
    need_torch()
    with tempfile.TemporaryDirectory(prefix="pl-py-tensors-") as tmp:
        row, m, out = run_report(tmp, "every", [TORCH_PY, TRAIN, "--steps", "12"], env=clean_env(
            PLATEAU_TENSOR_BUDGET="1"))
        t = m.get("tensors")
        assert t and [p[0] for p in t["series"]] == list(range(1, 13)), t and t["series"]
        assert all(p[1] >= 10 for p in t["series"]), t["series"]  # 10 parameters of G and D at least
        assert "dev.allocated" not in m, "CUDA counters without CUDA"
        print(f"ok: tensors at every step of train.py: {[p[1] for p in t['series']]}")

        row, m, out = run_report(tmp, "kept", [TORCH_PY, STANDIN, "--mode", "flat", "--steps", "160", "--tensors",
                                               "3"], env=clean_env(PLATEAU_TENSOR_BUDGET="1"))
        t = m["tensors"]
        assert t["verdict"] == "leak" and t["leak"]["per_step"] == 3, (t["verdict"], t.get("leak"))
        assert "retained-tensors" in codes(row), codes(row)
        print("ok: 3 tensors kept per step: tensors leak +3/step, retained tensors")

        # CUDA tensors, per device in the trace: 1 more per step on device 0, 2 on device 1: tensors.cuda +3/step
        row, m, out = run_report(tmp, "cuda", [TORCH_PY, STANDIN, "--mode", "flat", "--steps", "160", "--devices",
                                               "2", "--cuda-tensors", "1"], env=clean_env(PLATEAU_TENSOR_BUDGET="1"))
        t = m["tensors.cuda"]
        assert t["verdict"] == "leak" and t["leak"]["per_step"] == 3, (t["verdict"], t.get("leak"))
        # the count at step 1 ran before the first CUDA tensor was kept: the series starts at step 2
        assert [p[:2] for p in t["series"][:3]] == [[2, 3], [3, 6], [4, 9]] and t["last_value"] == 3 * 159, \
            (t["series"][:3], t["last_value"])
        assert m["tensors"]["verdict"] in ("flat", "plateau"), "CUDA tensors counted as the host's"
        print("ok: CUDA tensors on 2 devices: tensors.cuda leak +3/step (their sum), host tensors "
              + m["tensors"]["verdict"])

        row, m, out = run_report(tmp, "flatt", [TORCH_PY, STANDIN, "--mode", "flat", "--steps", "160"],
                                 env=clean_env(PLATEAU_TENSOR_BUDGET="1"))
        assert m["tensors"]["verdict"] in ("flat", "plateau"), m["tensors"]["verdict"]
        assert "retained-tensors" not in codes(row), codes(row)

        # seed 003: a cache of tensors filled during the first 90 steps, then "live tensors flat at N after step 90"
        row, m, out = run_report(tmp, "warm", [TORCH_PY, STANDIN, "--mode", "flat", "--steps", "200", "--tensors",
                                               "78", "--tensor-steps", "90"], env=clean_env(PLATEAU_TENSOR_BUDGET="1"))
        t = m["tensors"]
        assert t["verdict"] == "plateau" and t["warmup"]["steps"] == 90, (t["verdict"], t["warmup"])
        assert t["series"][-1][1] - t["series"][0][1] == 78 * 90, (t["series"][0], t["series"][-1])
        assert "retained-tensors" not in codes(row), codes(row)
        line = [x for x in out.splitlines() if x.strip().startswith("tensors ")]
        print(f"ok: a tensor cache warming up for 90 steps: {line[0].split(None, 1)[1] if line else t['verdict']}")

        row, m, out = run_report(tmp, "default", [TORCH_PY, TRAIN, "--steps", "200"])
        n = len(m["tensors"]["series"])
        assert 1 <= n < 200, n
        print(f"ok: default 1 % budget: tensors counted at {n} of 200 steps")


AUTOGRAD_PY = os.path.join(SRC, "tests", "python", "tensors", "total_loss.py")


def mode_autograd(argv):
    """What autograd keeps, on a real training loop (tests/python/tensors/total_loss.py, unmarked), 5 times each:
    `total_loss += loss` keeps every step's graph through total_loss.grad_fn, invisible to the gc count: the
    autograd metric grows by the step's 12 nodes, the process reads LEAK on it and the diagnosis names the retained
    graphs; the same loop accumulating `loss.item()` has a flat autograd metric and no finding about tensors.
    PLATEAU_TENSOR_BUDGET=0.3 (early rule: 1.5 x the wall time, so never the limit: a count at every 1/16 of the
    steps so far) so that the 250 fast steps get counts to the end on a loaded machine. The schedule itself (the
    default budget, and a count slowed by the machine not stopping the counts after it) is checked by `unit` with
    a fake clock."""
    need_torch()
    runs = int(argv[0]) if argv else 5
    args = ["--steps", "250", "--hidden", "64"]
    want = subprocess.run([TORCH_PY, AUTOGRAD_PY] + args, capture_output=True, text=True, timeout=120).stdout
    with tempfile.TemporaryDirectory(prefix="pl-py-autograd-") as tmp:
        seen = []
        for i in range(runs):
            for keep in (True, False):
                name = "%s%d" % ("keep" if keep else "item", i)
                d, r = plateau_run(tmp, name, [TORCH_PY, AUTOGRAD_PY] + args + (["--keep-graph"] if keep else []),
                                   env=clean_env(PLATEAU_TENSOR_BUDGET="0.3"))
                if not keep:
                    assert r.stdout == want, f"{name}: the program's output changed: {r.stdout!r} != {want!r}"
                row, m, out = report_row(d, name)
                ag = m.get("autograd")
                assert ag is not None, f"{name}: no autograd metric: {sorted(m)}"
                dx = [x["text"] for x in row["diagnosis"] if x["code"] == "retained-tensors"]
                if keep:
                    assert ag["verdict"] == "leak" and ag["leak"]["per_step"] == 12, (name, ag["verdict"],
                                                                                    ag.get("leak"), ag["series"])
                    assert row["verdict"]["kind"] == "leak", (name, row["verdict"])
                    assert dx and "autograd nodes" in dx[0] and "total_loss += loss" in dx[0], (name, codes(row))
                    assert m["tensors"]["verdict"] != "leak", "the gc count grew: the case is not the hidden one"
                    seen.append(("keep", ag["verdict"], row["verdict"]["kind"], row["verdict"]["metric"]))
                else:
                    assert ag["verdict"] == "flat", (name, ag["verdict"], ag["series"])
                    assert m["tensors"]["verdict"] in ("flat", "plateau"), (name, m["tensors"]["verdict"])
                    assert not dx and row["verdict"]["kind"] not in ("leak", "slow-growth"), (name, codes(row))
                    seen.append(("item", ag["verdict"], row["verdict"]["kind"]))
        n = len(m["autograd"]["series"])
        print(f"ok: autograd, {runs} runs each: total_loss += loss: {sorted(set(x for x in seen if x[0] == 'keep'))}; "
              f"loss.item(): {sorted(set(x for x in seen if x[0] == 'item'))}; {n} counts in the last run")
        if runs > 1:
            assert len(set(seen)) == 2, f"not the same answer in every run: {sorted(set(seen))}"


# --------------------------------------------------------------------------------- plateau's allocator for torch

TORCH2 = os.path.join(SRC, "tests", "python", "torch2")  # the stand-in torch >= 2.0
ALLOC_STANDIN = os.path.join(SRC, "tests", "python", "allocator_standin.py")
LIBCUDA = os.environ.get("PL_LIBCUDA", "")               # the CUDA driver test double


def alloc_env(**extra):
    env = dict(PYTHONPATH=TORCH2, PLATEAU_LIBCUDA=LIBCUDA, PLATEAU_ALLOC_CONF="", PYTORCH_CUDA_ALLOC_CONF="")
    env.update(extra)
    return clean_env(**env)


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def refusals(r):
    return [x for x in r.stderr.splitlines() if x.startswith("plateau: plateau.torch.use_allocator(): ")]


FALLBACK = r"""import json, sys, torch
import plateau.torch as pt
from plateau import _torchstats as ts
path = pt.library_path()
pt._load(path)
assert pt._observed is False, "no tracer in this process, yet the allocator counts as observed"
mem = torch.cuda.memory
mem.change_current_allocator(mem.CUDAPluggableAllocator(path, "plateau_torch_malloc", "plateau_torch_free"))
pt._active = True
kept = [mem.empty(3 << 20), mem.empty(1000)]
gone = mem.empty(5 << 20)
del gone
sent = []
n = ts.cuda_stats(lambda src, dev, arr, k: sent.append([src, dev] + list(arr[:k])))
st = pt.memory_stats()
pt._observed = True
n_observed = ts.cuda_stats(lambda *a: sent.append("observed"))
del kept
before = pt.memory_stats(0)["reserved_bytes.all.current"]
emptied = pt.empty_cache("cuda:0")
print(json.dumps({"path": path, "n": n, "sent": sent, "stats": st, "n_observed": n_observed,
                  "same": pt.memory_stats("cuda:0") == pt.memory_stats(0), "dev1": pt.memory_stats(1),
                  "emptied": emptied, "reserved": [before, pt.memory_stats()["reserved_bytes.all.current"]]}))
"""


def mode_torch_allocator(argv):
    """plateau.torch.use_allocator() and memory_stats() over a stand-in torch >= 2.0 (tests/python/torch2) whose
    CUDAPluggableAllocator really loads libplateau_alloc.so and calls its entry points, over the CUDA driver test
    double; the refusals; the no-op outside plateau run; Debian's real torch 1.13 refused."""
    MiB = 1 << 20
    py = TORCH_PY if os.path.exists(TORCH_PY) else sys.executable  # the stand-in needs no real torch
    with tempfile.TemporaryDirectory(prefix="pl-py-alloc-") as tmp:
        # under plateau run: switched, every tensor through our entry points, the tracer records the allocator
        d, r = plateau_run(tmp, "leak", [py, ALLOC_STANDIN, "--steps", "160"], env=alloc_env())
        row, m, out = report_row(d, "leak")
        got = last_json(r.stdout)
        assert got["switched"] and got["again"] and got["pluggable"] and got["native_live"] == 0, got
        assert got["pluggable_calls"] == 160 * 9, got["pluggable_calls"]  # 5 mallocs and 4 frees per step
        st = got["stats"]
        want = {"allocated_bytes.all.current": 160 * MiB, "allocation.all.current": 160,
                "allocation.all.allocated": 160 * 5, "allocation.all.freed": 160 * 4,
                "allocated_bytes.small_pool.peak": 161 * MiB, "num_ooms": 0,
                "plateau.capacity_bytes": 1 << 30}
        bad = {k: (st.get(k), v) for k, v in want.items() if st.get(k) != v}
        assert not bad and st["reserved_bytes.all.current"] >= 160 * MiB, f"memory_stats (got, want): {bad}"
        assert not refusals(r), r.stderr
        print(f"ok: use_allocator() under plateau run: {got['pluggable_calls']} mallocs/frees through "
              f"plateau_torch_malloc/free, memory_stats() in torch's keys ({len(st)} of them)")
        al = m["dev.allocated"]
        assert al["verdict"] == "leak" and al["leak"]["per_step"] == MiB, (al["verdict"], al.get("leak"))
        assert m["dev.tensors"]["verdict"] == "leak" and "retained-tensors" in codes(row), codes(row)
        # the tracer records our allocator (events and stats); the bootstrap must not send them again as torch's
        assert "dev.active" not in m and "dev.inactive_split" not in m, sorted(m)
        print("ok: the tracer records the allocator: dev.allocated leak +1 MiB/step, retained tensors; the "
              "bootstrap sends no second copy")
        row, m, out = run_report(tmp, "flat", [py, ALLOC_STANDIN, "--steps", "160", "--keep", "0"],
                                 env=alloc_env())
        assert m["dev.allocated"]["verdict"] in ("flat", "plateau"), m["dev.allocated"]["verdict"]
        assert not {"retained-tensors", "device-growth"} & set(codes(row)), codes(row)
        print("ok: temporaries only: dev.allocated " + m["dev.allocated"]["verdict"])

        # refusals: one line each, False, torch's own allocator serves the tensors
        for name, args, env, text in [
                ("initialised", ["--init-first"], alloc_env(), "CUDA is already initialised"),
                ("nolib", [], alloc_env(PLATEAU_ALLOC_LIB=os.path.join(tmp, "none", "libplateau_alloc.so")),
                 "libplateau_alloc.so not found"),
                ("torch1", [], alloc_env(PL_STANDIN_TORCH_VERSION="1.13.1"), "needs torch >= 2.0"),
        ]:
            d, r = plateau_run(tmp, name, [py, ALLOC_STANDIN, "--steps", "3"] + args, env=env)
            got, lines = last_json(r.stdout), refusals(r)
            assert not got["switched"] and not got["pluggable"] and got["stats"] == {}, (name, got)
            assert got["native_live"] == 3 + (name == "initialised"), (name, got)
            assert len(lines) == 1 and text in lines[0], (name, r.stderr)
            print(f"ok: refused ({name}): {lines[0]}")

        # outside plateau run: one note, then nothing; output and status are the program's
        r = subprocess.run([py, ALLOC_STANDIN, "--steps", "3"], capture_output=True, text=True, timeout=120,
                           env=alloc_env(PYTHONPATH=PYDIR + ":" + TORCH2))
        got = last_json(r.stdout)
        assert r.returncode == 0 and not got["switched"] and not got["pluggable"] and got["stats"] == {}, got
        assert r.stderr.count("\n") == 1 and "use_allocator() does nothing" in r.stderr, r.stderr
        print("ok: outside plateau run: " + r.stderr.strip())

        # the bootstrap's counters when the tracer does not record the allocator: ours, as torch's
        r = subprocess.run([py, "-c", FALLBACK], capture_output=True, text=True, timeout=120,
                           env=alloc_env(PYTHONPATH=PYDIR + ":" + TORCH2))
        assert r.returncode == 0, r.stderr
        got = last_json(r.stdout)
        assert os.path.realpath(got["path"]).startswith(os.path.realpath(os.path.dirname(PYDIR))), got["path"]
        st, (sent,) = got["stats"], got["sent"]
        assert got["n"] == 1 and sent[:2] == [1, 0], got  # PLATEAU_STATS_TORCH_CUDA, device 0
        assert sent[2:] == [st["allocated_bytes.all.current"], st["reserved_bytes.all.current"],
                            st["active_bytes.all.current"], st["inactive_split_bytes.all.current"],
                            st["num_alloc_retries"], st["num_ooms"], st["allocation.all.current"],
                            st["segment.all.current"], st["allocated_bytes.all.peak"], st["reserved_bytes.all.peak"],
                            st["requested_bytes.all.current"], st["plateau.capacity_bytes"]], (sent, st)
        assert sent[2] == 3 * MiB + 1024 and sent[8] == 2 and sent[10] == 8 * MiB + 1024, sent
        assert got["n_observed"] == 0 and got["same"] and got["dev1"] == {}, got
        assert got["emptied"] and got["reserved"][1] < got["reserved"][0], got["reserved"]
        print("ok: without the tracer's own records the bootstrap sends ours as torch's counters, values as "
              "memory_stats(); empty_cache() gives back cached segments")

    # Debian's torch 1.13: no pluggable API; refused, nothing loaded, CUDA untouched
    need_torch()
    prog = ("import torch, plateau.torch as pt\nr = pt.use_allocator()\n"
            "print(r, torch.cuda.is_initialized(), 'libplateau_alloc' in open('/proc/self/maps').read(), "
            "pt.memory_stats(), torch.__version__)\n")
    with tempfile.TemporaryDirectory(prefix="pl-py-alloc-") as tmp:
        d, r = plateau_run(tmp, "real", [TORCH_PY, "-c", prog])
        words, lines = r.stdout.split(), refusals(r)
        assert words[:4] == ["False", "False", "False", "{}"], r.stdout
        assert len(lines) == 1 and "needs torch >= 2.0" in lines[0] and words[4] in lines[0], r.stderr
        print("ok: real torch " + words[4] + ": " + lines[0])


# ---------------------------------------------------------------------------------------------- package

DUCK = r"""import sys, types
import plateau
# Hugging Face: the Trainer calls on_step_end once per optimizer step; other hooks are no-ops
hf = plateau.TrainerCallback()
args, control = types.SimpleNamespace(), types.SimpleNamespace()
state = types.SimpleNamespace(global_step=0, epoch=0.0)
hf.on_train_begin(args, state, control)
hf.on_epoch_begin(args, state, control)
for s in range(1, 6):
    hf.on_step_begin(args, state, control)
    state.global_step = s
    hf.on_step_end(args, state, control)
hf.on_evaluate(args, state, control, metrics={})
# Lightning: on_train_batch_end per batch, global_step moves once per 2 batches (gradient accumulation)
lc = plateau.LightningCallback()
tr = types.SimpleNamespace(global_step=0, current_epoch=0)
lc.on_train_epoch_start(tr, None)
for b in range(8):
    if b % 2 == 1:
        tr.global_step += 1
    lc.on_train_batch_end(tr, None, None, None, b)
lc.on_validation_start(tr, None)
lc.on_validation_end(tr, None)
plateau.mark("done")
print("duck ok", plateau.__file__)
"""


def mode_package(argv):
    with tempfile.TemporaryDirectory(prefix="pl-py-pkg-") as tmp:
        src = os.path.join(tmp, "src")
        shutil.copytree(os.path.join(SRC, "python"), src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        venv = os.path.join(tmp, "venv")
        base = TORCH_PY if os.path.exists(TORCH_PY) else sys.executable
        subprocess.run([base, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
        vpy = os.path.join(venv, "bin", "python")
        r = subprocess.run([vpy, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", src],
                           capture_output=True, text=True, env=clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1"))
        if r.returncode != 0 and "No module named pip" in r.stderr:
            print(f"skip: {base} has no pip: {r.stderr.strip()}")
            sys.exit(SKIP)
        assert r.returncode == 0, f"pip install failed:\n{r.stdout}\n{r.stderr}"
        site = subprocess.run([vpy, "-c", "import plateau, sysconfig; print(plateau.__file__); "
                               "print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                              cwd=tmp, env=clean_env())
        assert site.returncode == 0, site.stderr
        path, purelib = site.stdout.split()
        assert path.startswith(venv), f"plateau imported from {path}, not the venv"
        assert not os.path.exists(os.path.join(purelib, "sitecustomize.py")), "pip installed the bootstrap file"
        print(f"ok: pip install ./python into a fresh venv: {path}")
        # outside plateau run: one note, then nothing, and the program's own output and status unchanged
        r = subprocess.run([vpy, "-c", "import plateau\nplateau.step()\nplateau.mark('x')\nplateau.step()\n"
                            "print('out')\nraise SystemExit(3)"], capture_output=True, text=True, cwd=tmp,
                           env=clean_env())
        notes = [x for x in r.stderr.splitlines() if x.startswith("plateau:")]
        assert r.returncode == 3 and r.stdout == "out\n" and len(notes) == 1 and r.stderr.count("\n") == 1, \
            f"outside plateau run: rc {r.returncode} {r.stdout!r} {r.stderr!r}"
        print("ok: outside plateau run: one note, then no-ops")
        # the callbacks against duck-typed trainers, under plateau run, with the installed package only
        duck = os.path.join(tmp, "duck.py")
        write(duck, DUCK)
        d, r = plateau_run(tmp, "duck", [vpy, duck], env=clean_env(PLATEAU_PYTHON="0"))
        assert r.stdout.startswith("duck ok " + venv), r.stdout
        (row,) = traces(d, "duck.py")
        assert row["steps_api"] == 5 + 4 and row["steps_optimizer"] == 0, f"callback steps: {row}"
        want = ["epoch 0.0", "evaluate at step 5", "epoch 0", "validation-begin", "validation-end", "done"]
        assert row["marks"] == want, f"marks {row['marks']} != {want}"
        print(f"ok: callbacks under plateau run: {row['steps_api']} steps, marks {row['marks']}")


def framework_python():
    """The interpreter for the *_real tests and, when it is not the framework venv, why that venv is not used."""
    if os.environ.get("PL_FRAMEWORK_PYTHON"):
        return os.environ["PL_FRAMEWORK_PYTHON"], ""
    venv = os.environ.get("PL_FRAMEWORK_VENV", "")
    if venv and os.path.exists(os.path.join(venv, ".stamp")):
        return os.path.join(venv, "bin", "python"), ""
    why = f"no framework venv at {venv} (make framework-venv makes it)"
    if venv and os.path.exists(venv + ".failed"):
        with open(venv + ".failed") as f:
            why = f.read().strip()
    if not os.path.exists(TORCH_PY):  # the torch2.* reuse: no torch 2 venv, no fallback (skip with its reason)
        need_torch()
    return TORCH_PY, why


def framework_missing(py, module):
    """Why `module` does not import with `py` (the compat shim of tests/python/torch113_compat.py installed first,
    as the framework scripts do), or "" when it does."""
    probe = ("import sys; sys.path.insert(0, %r); import torch113_compat; torch113_compat.install(); import %s" %
             (os.path.join(SRC, "tests", "python"), module))
    r = subprocess.run([py, "-c", probe], capture_output=True, text=True, env=clean_env())
    if r.returncode == 0:
        return ""
    return (f"{module} does not import with {py}: {(r.stderr.strip().splitlines() or ['?'])[-1]}; "
            f"{framework_python()[1] or 'PL_FRAMEWORK_PYTHON / the framework venv lacks it'}")


REAL = r"""import sys
sys.path.insert(0, sys.argv[1])
import torch113_compat
torch113_compat.install()
import plateau
try:
    import torch
    print("torch", torch.__version__)
except Exception as e:
    print("torch: cannot import: %s: %s" % (type(e).__name__, e))
ok = []
try:
    import transformers
except Exception as e:
    print("transformers: cannot import: %s: %s" % (type(e).__name__, e))
else:
    cb = plateau.TrainerCallback()
    assert isinstance(cb, transformers.TrainerCallback)
    cb.on_step_end(None, transformers.TrainerState(global_step=1), transformers.TrainerControl())
    print("transformers", transformers.__version__)
    ok.append("transformers")
for name in ("lightning.pytorch", "pytorch_lightning"):
    try:
        __import__(name)
    except Exception as e:
        print("%s: cannot import: %s: %s" % (name, type(e).__name__, e))
    else:
        base = sys.modules[name].Callback
        assert isinstance(plateau.LightningCallback(), base)
        print(name, sys.modules[name].__version__)
        ok.append(name)
        break
print("real:", " ".join(ok))
"""


def mode_callbacks_real(argv):
    py, why = framework_python()
    r = subprocess.run([py, "-c", REAL, os.path.join(SRC, "tests", "python")], capture_output=True, text=True,
                       env=clean_env(PYTHONPATH=PYDIR))
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout.strip())
    if r.stdout.strip().endswith("real:"):
        print(f"skip: neither transformers nor Lightning imports with {py} (PyPI's current versions need torch >= 2; "
              f"Debian's is 1.13); {why or 'the venv lacks them'}; the duck-typed tests (python.package) still ran")
        sys.exit(SKIP)
    if "transformers" not in r.stdout.split("real:")[-1]:
        return
    hf = os.path.join(SRC, "tests", "python", "hf_trainer.py")
    with tempfile.TemporaryDirectory(prefix="pl-py-hf-") as tmp:
        # a real Trainer: the bootstrap alone, 5 optimizer steps of 1 batch and 6 of 2 micro-batches
        for n, accum in ((5, 1), (6, 2)):
            row, out = run_steps(tmp, f"hf_accum{accum}", [py, hf, "--steps", str(n), "--accum", str(accum)],
                                 "hf_trainer.py", n)
            assert out == [f"hf_trainer.py: global_step {n}"], out
            assert row["steps_optimizer"] == n and row["steps_api"] == 0, f"Trainer, bootstrap only: {row}"
        # then with the callback
        d, r = plateau_run(tmp, "hf_cb", [py, hf, "--steps", "6", "--accum", "2", "--callback"])
        (row,) = traces(d, "hf_trainer.py")
        assert row["steps_optimizer"] + row["steps_api"] == 6 and row["steps_api"] == 5, f"Trainer + callback: {row}"
        assert row["marks"] == ["epoch 0", "evaluate at step 3", "evaluate at step 6"], row["marks"]
        print(f"ok: a real transformers Trainer: exact steps with the bootstrap alone (5 of 1 batch, 6 of 2) and with "
              f"the callback (6 of 2), marks {row['marks']}")


def run_steps(tmp, name, cmd, script, n):
    """cmd under plateau run: the report's steps and the trace's (optimizer, api) steps for `script`; no detection."""
    d, r = plateau_run(tmp, name, cmd)
    out = [line for line in r.stdout.splitlines() if line.startswith(script + ":")]
    steps, detected = report_steps(tmp, d, script)
    assert not detected, f"{name}: the report fell back to period detection"
    assert steps == n, f"{name}: the report has {steps} steps, the framework made {n} optimizer steps: {out}"
    (row,) = traces(d, script)
    return row, out


def framework_script(modules, script):
    """The framework interpreter, those of `modules` that import with it (skipping the test, with the reasons, when
    none does) and the script's path."""
    py, _ = framework_python()
    ok = []
    for module in modules:
        why = framework_missing(py, module)
        if why:
            print(f"{'skip' if module == modules[-1] and not ok else 'not run'}: {why}")
        else:
            ok.append(module)
    if not ok:
        sys.exit(SKIP)
    return py, ok, os.path.join(SRC, "tests", "python", script)


def mode_lightning_real(argv):
    # both Lightnings are in the framework venv: 1.x (pytorch_lightning) and 2.x (lightning.pytorch); each program
    # imports one, and the callback must subclass that one's Callback (lightning_trainer.py checks). ARGV names the
    # packages to run instead (torch2.lightning_real: lightning.pytorch alone, whose pytorch_lightning is the same
    # 2.x code under its other name)
    py, packages, script = framework_script(argv or ["pytorch_lightning", "lightning.pytorch"],
                                            "lightning_trainer.py")
    with tempfile.TemporaryDirectory(prefix="pl-py-lightning-") as tmp:
        for package in packages:
            # the bootstrap alone: one step per optimizer step, with and without accumulate_grad_batches
            for n, accum in ((5, 1), (4, 3)) if package == packages[0] else ((4, 3),):
                name = f"{package}_accum{accum}"
                row, out = run_steps(tmp, name, [py, script, "--package", package, "--steps", str(n), "--accum",
                                                 str(accum)], "lightning_trainer.py", n)
                assert out and out[0].startswith(f"lightning_trainer.py: global_step {n} "), f"{name}: {out}"
                assert row["steps_optimizer"] == n and row["steps_api"] == 0 and not row["marks"], f"{name}: {row}"
                print(f"ok: a real {package} Trainer, {n} optimizer steps of {accum} batches, bootstrap only: "
                      f"{n} steps")
            # with the callback: the first explicit step joins the first optimizer step, then the callback's own
            # steps; 12 batches of 2, validation every 4 batches: 3 validations, each between a begin and an end mark
            name = f"{package}_cb"
            row, out = run_steps(tmp, name, [py, script, "--package", package, "--steps", "6", "--accum", "2",
                                             "--callback"], "lightning_trainer.py", 6)
            assert out == ["lightning_trainer.py: global_step 6 validations 3"], f"{name}: {out}"
            assert row["steps_optimizer"] == 1 and row["steps_api"] == 5, f"{name}: {row}"
            assert row["marks"] == ["epoch 0"] + ["validation-begin", "validation-end"] * 3, f"{name}: {row['marks']}"
            print(f"ok: a real {package} Trainer + plateau.LightningCallback(): 6 steps, marks {row['marks']}")


def judge(path):
    r = subprocess.run([PLATEAU, "judge", path, "--fail-on-leak"], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def mode_judge_lightning(argv):
    # the metrics.csv a user of Lightning has: written by the real CSVLogger of a real Trainer, not typed in its shape
    py, _, script = framework_script(["lightning.pytorch"], "lightning_csv.py")
    steps = 200
    with tempfile.TemporaryDirectory(prefix="pl-py-judge-lightning-") as tmp:
        want = {  # shape: (exit status under --fail-on-leak, the verdict line's start)
            "plateau": (0, "verdict: no leak (warmup 40 steps, then flat)"),
            "leak": (3, "verdict: LEAK in pid 1 (run 1 (lines 2-204, steps 0-199)): +2.86 MiB/step of dev.reserved"),
        }
        for shape, (rc_want, verdict) in want.items():
            out = os.path.join(tmp, shape)
            r = subprocess.run([py, script, out, shape, str(steps)], capture_output=True, text=True, timeout=200,
                               env=clean_env())
            assert r.returncode == 0 and f"global_step {steps}" in r.stdout, f"{shape}: {r.stdout}\n{r.stderr}"
            csv_path = os.path.join(out, "csv", "version_0", "metrics.csv")
            with open(csv_path) as f:
                lines = f.read().splitlines()
            # Lightning's own layout: sorted columns, a row per step, validation rows without the memory value
            assert lines[0] == "epoch,gpu_mem_mb,step,train_loss,val_loss", f"{shape}: header {lines[0]}"
            val_rows = [line for line in lines[1:] if line.split(",")[1] == ""]
            assert len(lines) == 1 + steps + 4 and len(val_rows) == 4, f"{shape}: {len(lines)} lines, {val_rows}"
            rc, text = judge(csv_path)
            assert rc == rc_want, f"{shape}: plateau judge exited {rc}, not {rc_want}\n{text}"
            first, second = text.splitlines()[:2]
            assert first == (f"plateau judge: {csv_path}: CSV, 1 run, steps from 'step'; "
                             f"'gpu_mem_mb' judged as dev.reserved"), f"{shape}: {first}"
            assert second.startswith(verdict), f"{shape}: {second!r} is not {verdict!r}\n{text}"
            print(f"ok: Lightning's CSVLogger, {shape}: {second}")


def mode_accelerate_real(argv):
    py, _, script = framework_script(["accelerate"], "accelerate_train.py")
    with tempfile.TemporaryDirectory(prefix="pl-py-accelerate-") as tmp:
        # accelerate's optimizer wrapper skips the inner step on accumulating batches: 12 batches of 4 are 3 steps
        for batches, accum in ((6, 1), (12, 4)):
            n = batches // accum
            name = f"accelerate_accum{accum}"
            row, out = run_steps(tmp, name, [py, script, "--batches", str(batches), "--accum", str(accum)],
                                 "accelerate_train.py", n)
            assert out == [f"accelerate_train.py: optimizer steps {n}"], f"{name}: {out}"
            assert row["steps_optimizer"] == n and row["steps_api"] == 0, f"{name}: {row}"
            print(f"ok: accelerate, {batches} batches, accumulation {accum}, bootstrap only: {n} steps")


FAKE_TRAIN = """import sys
import torch
opt = torch.optim.Optimizer()
for _ in range(int(sys.argv[1])):
    junk = [bytearray(4096) for _ in range(64)]
    opt.step()
print("%d.%d fake steps done" % sys.version_info[:2])
"""


def mode_steps_pythons(argv):
    fake_torch = dict(FAKE_TORCH)
    fake_torch["torch/optim/optimizer.py"] = (
        "hooks = []\ndef register_optimizer_step_post_hook(h):\n    hooks.append(h)\n"
        "class Optimizer(object):\n    def step(self):\n        for h in hooks:\n            h(self, (), {})\n")
    with tempfile.TemporaryDirectory(prefix="pl-py-pythons-") as tmp:
        fake = os.path.join(tmp, "fake")
        for k, v in fake_torch.items():
            write(os.path.join(fake, k), v)
        prog = os.path.join(tmp, "fake_train.py")
        write(prog, FAKE_TRAIN)
        seen = []
        for py in interpreters():
            ver = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True)
            if ver.returncode != 0 or tuple(int(x) for x in ver.stdout.split(".")) < (3, 7):
                continue
            name = "py" + ver.stdout.strip()
            d, r = plateau_run(tmp, name + "-" + str(len(seen)), [py, prog, "7"], env=clean_env(PYTHONPATH=fake))
            assert r.stdout.strip() == ver.stdout.strip() + " fake steps done", r.stdout
            (row,) = traces(d, "fake_train.py")
            assert row["steps_optimizer"] == 7 and row["steps_api"] == 0, f"{py}: {row}"
            seen.append(ver.stdout.strip())
        assert "3.9" in seen and "3.10" in seen or not os.path.isdir(os.path.expanduser("~/.pyenv/versions/3.9.18")), \
            seen
        print(f"ok: 7 optimizer steps from the global hook under plateau run on {', '.join(sorted(set(seen)))}")


def mode_framework_venv(argv):
    script = os.path.join(SRC, "tests", "python", "framework-venv.sh")
    with tempfile.TemporaryDirectory(prefix="pl-py-fwvenv-") as tmp:
        links = os.path.join(tmp, "no-wheels")
        os.mkdir(links)
        no_torch = sys.executable  # the pyenv python3 meson runs this with; any interpreter without torch will do
        if subprocess.run([no_torch, "-c", "import torch"], capture_output=True).returncode == 0:
            no_torch = "/bin/false"
        cases = [  # (name, extra environment, the reason expected in the one line)
            ("no-torch", {"PL_FRAMEWORK_BASE_PYTHON": no_torch}, f"{no_torch} cannot import torch"),
            ("no-index", {"PL_FRAMEWORK_BASE_PYTHON": TORCH_PY, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": links,
                          "PIP_NO_CACHE_DIR": "1"}, "pip install -r tests/python/frameworks.txt failed (no network?)"),
        ]
        for name, extra, reason in cases:
            if name == "no-index":
                need_torch()
            venv = os.path.join(tmp, name)
            r = subprocess.run([script, venv], capture_output=True, text=True, timeout=200,
                               env=clean_env(**extra))
            assert r.returncode == 0, f"{name}: framework-venv.sh exited {r.returncode}\n{r.stderr}"
            assert not os.path.exists(venv), f"{name}: a half venv was left: {os.listdir(venv)}"
            with open(venv + ".failed") as f:
                failed = f.read()
            assert failed.count("\n") == 1 and reason in failed, f"{name}: {failed!r}"
            assert r.stderr.startswith(failed), f"{name}: stderr does not open with the reason: {r.stderr}"
            # the *_real tests skip with that reason
            r = subprocess.run([sys.executable, __file__, "accelerate_real"], capture_output=True, text=True,
                               env=clean_env(PL_FRAMEWORK_VENV=venv, PL_FRAMEWORK_PYTHON=""))
            assert r.returncode == SKIP and failed.strip() in r.stdout, f"{name}: {r.returncode}\n{r.stdout}"
            print(f"ok: framework-venv.sh, {name}: exit 0, no venv, the tests skip saying: {failed.strip()}")


if __name__ == "__main__":
    mode = sys.argv[1]
    globals()["mode_" + mode](sys.argv[2:])
