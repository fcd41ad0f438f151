"""Run a script (argv[1:]) as __main__ and, at its exit, write on stderr the live tensor counts the bootstrap made
(plateau/_torchstats.py's own figures): `COUNTS <counts> <their seconds> <boundaries> <wall seconds since this
wrapper started>`. Used by bench/tensor_overhead.sh and bench/tensor_slow_count.sh under plateau run."""
import atexit
import runpy
import sys
import time

t0 = time.perf_counter()


def said():
    for n, m in list(sys.modules.items()):
        if n.endswith("._torchstats") and hasattr(m, "n_counts"):
            w = time.perf_counter() - t0
            sys.stderr.write("COUNTS %d %.4f %d %.3f\n" % (m.n_counts, m.count_seconds, m._boundaries, w))


atexit.register(said)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
