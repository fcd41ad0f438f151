"""The `plateau` command of the wheel (docs/install.md): pip puts a console script on PATH that calls main(), which
replaces this Python process with the real executable, bin/plateau inside this package. That executable finds the
preload library in ../lib and the bootstrap in .. relative to itself (cli/run.c), so the install works wherever pip
put the package (a venv, --user, --target).

Python ignores SIGPIPE and SIGXFSZ at start-up and an ignored signal stays ignored across exec: both are put back
to their default first, as subprocess does for its children, so the traced program gets what it gets from a shell.
"""
import os
import signal
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "plateau")
    for name in ("SIGPIPE", "SIGXFSZ"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)
    try:
        os.execv(exe, ["plateau"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("plateau: cannot run %s: %s (reinstall the plateau-profiler wheel)\n" % (exe, e.strerror))
        return 127
