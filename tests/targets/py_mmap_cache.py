"""Memory outside malloc: a cache that lives in anonymous mappings, the way native libraries keep theirs (oneDNN's
primitive cache, an arena mapped whole), reached through ctypes. The end-to-end target of tests/cli/test_mmap.sh
(docs/verdict.md §5, "First touch"). Each step ends with plateau_step() when the tracer is loaded (the script has
no optimizer to take steps from); 0.05 s a step.

--mode grow: maps and fills a new 1 MiB range every step, for ever (a leak, named at the mmap line);
--mode stop: the same for --stop steps, then stops (a warmup, then a plateau);
--mode touch: maps 1 GiB once (MAP_NORESERVE) and fills 1 MiB more of it every step (first touch: RSS grows, the
live heap, which counts the mapping whole, does not).
"""
import argparse
import ctypes
import mmap
import time

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["grow", "stop", "touch"], default="grow")
p.add_argument("--steps", type=int, default=300)
p.add_argument("--stop", type=int, default=100)
args = p.parse_args()

libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
step = getattr(libc, "plateau_step", lambda: None)
MIB = 1 << 20
PROT = mmap.PROT_READ | mmap.PROT_WRITE
ANON = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
cache = []


def cache_grow():
    p = libc.mmap(None, MIB, PROT, ANON, -1, 0)  # a new cache entry of its own mapping
    ctypes.memset(p, 1, MIB)
    cache.append(p)


arena = libc.mmap(None, 1 << 30, PROT, ANON | 0x4000, -1, 0) if args.mode == "touch" else None  # MAP_NORESERVE
for s in range(args.steps):
    if args.mode == "touch":
        ctypes.memset(arena + s * MIB, 1, MIB)  # the arena fills as it goes
    elif args.mode == "grow" or s < args.stop:
        cache_grow()
    scratch = [bytearray(1000) for _ in range(100)]  # per-step work, freed
    time.sleep(0.05)
    step()
