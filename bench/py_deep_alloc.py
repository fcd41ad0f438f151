"""Per-sample cost probe for bench/pyframes_overhead.py: N allocations of 2 KiB (malloc, through bytearray) made
DEPTH Python frames deep; run with --sample-bytes 0 every one of them captures its stacks.
Usage: py_deep_alloc.py [N] [DEPTH]"""
import sys


def alloc(n):
    keep = None
    for _ in range(n):
        keep = bytearray(2048)
    return keep


def nest(depth, n):
    return nest(depth - 1, n) if depth > 1 else alloc(n)


n = int(sys.argv[1]) if len(sys.argv) > 1 else 50000
depth = int(sys.argv[2]) if len(sys.argv) > 2 else 30
print(len(nest(depth, n)))
