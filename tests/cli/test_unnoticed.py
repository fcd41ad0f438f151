#!/usr/bin/env python3
"""Integration: the program never notices plateau. Programs that look at themselves the ways a program can notice a
tracer (tests/targets/unnoticed.c: threads, the kernel's task list, descriptors and RLIMIT_NOFILE, fork, exec with an
explicit and an inherited environment, a parent capturing a child's stdout and stderr, signal dispositions and
masks, resource limits, files written through dup2'd and reused descriptors, its own exit status and death by a
signal, its own whole environment, /usr/bin/env started with the inherited or a derived environment by execv, execvp,
execle, posix_spawn(p), system and popen; tests/targets/py_unnoticed.py on every Python from 2.7 to 3.13 found here:
threads, fork, a captured child, an explicit environment, os.environ and sys.path, /usr/bin/env with the inherited
and a derived environment, a user's own `sitecustomize.py` and `plateau.py` beside the script; a torch program dying
of an uncaught CUDA OOM, tests/targets/py_torch_oom.py) run untraced and under
`plateau run`; stdout, stderr, exit status and the files they write must be byte for byte the same, and the children
they name in pids.txt must be traced. The C environment modes also run with the preload set by hand ("fallback"),
and with the user's own LD_PRELOAD, PYTHONPATH and a PLATEAU_* variable of theirs (the *_own_vars cases).
Usage: test_unnoticed.py PLATEAU TARGETS_BUILD_DIR TARGETS_SOURCE_DIR [CASE...]
"""
import glob
import re
import os
import resource
import shutil
import subprocess
import sys
import tempfile

plateau, tbuild, tsrc = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
only = sys.argv[4:]
C = os.path.join(tbuild, "target_unnoticed")


def nofile(n):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return set_limit


# name -> (argv, preexec_fn or None)
CASES = {
    "threads": ([C, "threads"], None),
    "tasks": ([C, "tasks"], None),
    "fds": ([C, "fds"], None),
    "fds_limit20": ([C, "fds"], nofile(20)),
    "fork": ([C, "fork"], None),
    "exec_env": ([C, "exec_env"], None),
    "exec_inherit": ([C, "exec_inherit"], None),
    "environ": ([C, "environ"], None),
    "stack": ([C, "stack"], None),
    "spawn_env": ([C, "spawn_env"], None),
    "stderr_capture": ([C, "stderr_capture"], None),
    "signals": ([C, "signals"], None),
    "limits": ([C, "limits"], None),
    "files": ([C, "files"], None),
    "exit42": ([C, "exit", "42"], None),
    "exit_signal": ([C, "exit", "signal"], None),
}


# The user's own LD_PRELOAD and PYTHONPATH (which plateau run changes for the command and the tracer puts back in
# place) and a PLATEAU_* variable of the user's (which plateau run leaves alone): the *_own_vars cases
OWN_VARS = {"LD_PRELOAD": "libm.so.6", "PYTHONPATH": "/nonexistent-pl-a:/nonexistent-pl-b",
            "PLATEAU_TENSOR_BUDGET": "0.5"}
CASES["environ_own_vars"] = ([C, "environ"], None)
CASES["spawn_env_own_vars"] = ([C, "spawn_env"], None)


def pythons():
    """(label, path) of every interpreter here: Debian's python3 (with torch) and pyenv's versions"""
    found = [("debian3", "/usr/bin/python3")] if os.path.exists("/usr/bin/python3") else []
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for d in sorted(glob.glob(os.path.join(root, "versions", "*"))):
        v = os.path.basename(d)
        for exe in ("python3", "python"):
            p = os.path.join(d, "bin", exe)
            if os.access(p, os.X_OK) and v[:1] in "23":
                found.append(("py" + v, p))
                break
    return found


for label, exe in pythons():
    CASES["python-" + label] = ([exe, "py_unnoticed.py"], None)
    if label == "debian3":
        CASES["python-debian3_own_vars"] = ([exe, "py_unnoticed.py"], None)
# the bootstrap's end-of-run record (a wrapped torch.cuda.OutOfMemoryError.__init__, an atexit callback): a torch
# program that catches one OOM and dies of another, uncaught
if subprocess.run(["/usr/bin/python3", "-c", "import torch"], stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL).returncode == 0:
    CASES["python-torch-oom"] = (["/usr/bin/python3", os.path.join(tsrc, "py_torch_oom.py")], None)


def prepare(work):
    """A fresh working directory: the Python program with a user's own plateau.py and sitecustomize.py beside it"""
    os.makedirs(work)
    shutil.copy(os.path.join(tsrc, "py_unnoticed.py"), work)
    with open(os.path.join(work, "plateau.py"), "w") as f:
        f.write('VALUE = "user\'s"\n')
    with open(os.path.join(work, "sitecustomize.py"), "w") as f:
        f.write('VALUE = "user\'s"\n')


def files_of(work):
    """what the program left in its working directory, but the files prepare() put there"""
    out = {}
    for name in sorted(os.listdir(work)):
        p = os.path.join(work, name)
        if name in ("py_unnoticed.py", "plateau.py", "sitecustomize.py", "__pycache__", "pids.txt") or \
                not os.path.isfile(p):
            continue
        with open(p, "rb") as f:  # a process id differs from run to run (CPython's fork warning prints one)
            out[name] = re.sub(rb"pid=[0-9]+", b"pid=N", f.read())
    return out


SH = ["/bin/sh", "-c", 'exec "$@" >stdout.txt 2>stderr.txt', "sh"]


def run(argv, preexec, work, extra_env=None):
    """The program's stdout and stderr go to files of its working directory (through a shell that execs it, traced
    and untraced alike: SH), so plateau run's own lines, on its stderr, stay apart from the program's"""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.update(extra_env or {})
    r = subprocess.run(argv, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec,
                       timeout=120, env=env)
    return r.returncode, files_of(work), r.stderr


def diff(a, b):
    """the lines that differ, untraced (-) and traced (+), at most 20"""
    import difflib
    lines = [line for line in difflib.unified_diff((a or b"").decode("utf-8", "replace").splitlines(),
                                                   (b or b"").decode("utf-8", "replace").splitlines(),
                                                   "untraced", "traced", lineterm="", n=0)]
    return "\n".join("  " + line for line in lines[2:22])


def untraced_children(name, work, rundir):
    """The children whose pids the program wrote to pids.txt (started with the inherited environment or one derived
    from it, which no longer shows plateau's variables) must have traces of their own in the run directory"""
    p = os.path.join(work, "pids.txt")
    if not os.path.exists(p):
        return []
    with open(p) as f:
        pids = f.read().split()
    missing = [pid for pid in pids if not glob.glob(os.path.join(rundir, pid + ".*.pltrace"))]
    return ["%s: children %s of %s were not traced" % (name, missing, pids)] if missing else []


def fallback(failures):
    """The preload set by hand (no plateau run): the program's environment and its children's are exactly untraced
    too, and the children are traced into the same directory"""
    preload = os.path.join(os.path.dirname(plateau), "..", "preload", "libplateau_preload.so")
    for mode in ("environ", "spawn_env"):
        work, rundir = os.path.join(tmp, "fallback-" + mode, "work"), os.path.join(tmp, "fallback-" + mode, "run")
        prepare(work)
        plain = run(SH + [C, mode], None, work)
        shutil.rmtree(work)
        prepare(work)
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", LD_PRELOAD=os.path.abspath(preload), PLATEAU_DIR=rundir,
                   PLATEAU_QUIET="1")
        r = subprocess.run(SH + [C, mode], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           timeout=120)
        traced = (r.returncode, files_of(work))
        for f in sorted(set(plain[1]) | set(traced[1])):
            if plain[1].get(f) != traced[1].get(f):
                failures.append("fallback %s: %s differs:\n%s" % (mode, f, diff(plain[1].get(f), traced[1].get(f))))
        if plain[0] != traced[0]:
            failures.append("fallback %s: exit status %r vs %r" % (mode, plain[0], traced[0]))
        if not glob.glob(os.path.join(rundir, "*.pltrace")):
            failures.append("fallback %s: no trace was written" % mode)
        failures += untraced_children("fallback " + mode, work, rundir)


failures = []
with tempfile.TemporaryDirectory(prefix="pl-unnoticed-") as tmp:
    n = 0
    for name, (argv, preexec) in CASES.items():
        extra_env = OWN_VARS if name.endswith("_own_vars") else None
        if only and name not in only:
            continue
        n += 1
        # the same working directory for both runs (CPython's warnings name the script's path)
        work, rundir = os.path.join(tmp, name, "work"), os.path.join(tmp, name, "run")
        prepare(work)
        plain = run(SH + argv, preexec, work, extra_env)
        shutil.rmtree(work)
        prepare(work)
        # plateau run's own lines go to its stderr; the program's stderr is the same descriptor, so plateau run
        # is told to be quiet and its stderr is compared after its own lines (prefixed "plateau: ") are dropped
        traced = run([plateau, "run", "--no-report", "-o", rundir, "--"] + SH + argv, preexec, work, extra_env)
        for what, a, b in zip(("exit status", "output"), plain[:2], traced[:2]):
            if what == "output":
                for f in sorted(set(a) | set(b)):
                    if a.get(f) != b.get(f):
                        failures.append("%s: %s differs:\n%s" % (name, f, diff(a.get(f), b.get(f))))
            elif a != b:
                failures.append("%s: %s differs: untraced %r, traced %r" % (name, what, a, b))
        if not glob.glob(os.path.join(rundir, "*.pltrace")):
            failures.append("%s: no trace was written (plateau run said: %r)" % (name, traced[2]))
        failures += untraced_children(name, work, rundir)
    if not only or "fallback" in only:
        fallback(failures)
        n += 2
    print("%d programs compared" % n)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok")
