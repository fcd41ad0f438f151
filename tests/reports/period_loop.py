"""A pure-Python training-loop stand-in for period detection (tests/reports/test_period_loops.c).

python3-torch is not installed here, so this imitates what a CPU loop does to the heap per iteration: a batch
(bytes), activations (lists of floats), a dict of per-parameter state, temporaries freed at the end of the step.
Marks each iteration with plateau_step() (when preloaded) as ground truth; period detection ignores the marks.
usage: period_loop.py STEPS WIDTH [jitter]
"""
import ctypes
import random
import sys

steps = int(sys.argv[1])
width = int(sys.argv[2])
jitter = len(sys.argv) > 3 and sys.argv[3] == "jitter"
try:
    step = ctypes.CDLL(None).plateau_step
except AttributeError:
    step = lambda: None
rng = random.Random(7)
params = {f"w{i}": [0.01] * width for i in range(8)}
for s in range(steps):
    n = width if not jitter else int(width * rng.uniform(0.6, 1.4))
    batch = bytes(n * 64)                             # input batch: one large malloc
    acts = []
    x = [float(b) for b in batch[: n * 4]]
    for name, w in params.items():                    # "layers": a list per activation
        x = [a * 0.5 + w[i % width] for i, a in enumerate(x)]
        acts.append(x)
    grads = {name: [a * 0.1 for a in acts[i][:width]] for i, name in enumerate(params)}
    for name, g in grads.items():                     # "optimizer": in-place update
        w = params[name]
        for i in range(width):
            w[i] -= 0.001 * g[i]
    del acts, grads, batch, x
    step()
