"""Pure-Python allocation-heavy loop for bench/pyframes_overhead.py: small objects, lists, dicts and strings made
and dropped every iteration (pymalloc and malloc), nothing kept. Usage: py_alloc_loop.py [ITERATIONS]"""
import sys


def step(i):
    rows = [[i, j, str(j)] for j in range(200)]
    index = {r[2]: r for r in rows}
    text = ",".join(index)
    big = [0.5] * 5000
    return len(text) + len(big)


n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
total = 0
for i in range(n):
    total += step(i)
print(total)
