# A Python program that looks at itself the ways a program can notice a tracer, and prints what it sees:
# tests/cli/test_unnoticed.py runs it untraced and under `plateau run` on every interpreter it finds (2.7 to 3.13)
# and compares the bytes. It must parse and run on all of them: no f-strings, no annotations.
import os
import subprocess
import sys
import threading

results = []


def work(k):
    total = 0
    for i in range(2000):
        total += len(bytearray(100 + i % 50)) + k
    results.append((k, total))


threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("threads: %s" % sorted(results))

# fork with no thread of the program's left running: CPython 3.12+ warns on stderr when the process has others (it
# counts the kernel's tasks, and a joined thread may still be leaving the kernel: wait until it has, up to 5 s)
import time
for _ in range(500):
    if len(os.listdir("/proc/self/task")) == 1:
        break
    time.sleep(0.01)
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork child status: %d" % (os.waitpid(pid, 0)[1] >> 8))

# a child of the same interpreter whose stdout and stderr the program captures
child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdout.write('child out\\n'); "
                          "sys.stderr.write('child err\\n')"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out, err = child.communicate()
print("captured: %r %r %d" % (out, err, child.returncode))

# a child given an explicit environment sees exactly it
child = subprocess.Popen(["/usr/bin/env"], env={"PATH": "/usr/bin", "X": "1"}, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
print("explicit env: %r" % (child.communicate()[0],))

# the program's own environment, its module search path, and /usr/bin/env run with the inherited environment and with
# one derived from it: exactly as untraced (each child's pid goes to pids.txt, which the test does not compare: every
# one must be traced)
print("environ: %r" % (list(os.environ.items()),))
print("sys.path: %r" % (sys.path,))
for label, env in (("inherited", None), ("derived", dict(os.environ, X="1"))):
    child = subprocess.Popen(["/usr/bin/env"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    print("env %s: %r" % (label, child.communicate()[0]))
    with open("pids.txt", "a") as f:
        f.write("%d\n" % child.pid)

# which sitecustomize the interpreter ran, and what `import sitecustomize` gives
try:
    import sitecustomize
    print("sitecustomize: %s" % getattr(sitecustomize, "VALUE", "not the user's"))
except ImportError:
    print("sitecustomize: none")

# a module of the program's own named like plateau's package
try:
    import plateau
    print("plateau: %s" % getattr(plateau, "VALUE", "not the user's"))
except ImportError:
    print("plateau: none")
sys.stdout.flush()
sys.stderr.write("done\n")
