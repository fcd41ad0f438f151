"""What an interpreter does that a frame reader must survive, all while the preload samples (tests/preload/
test_pyframes.py runs it traced and untraced and compares the output): threads that start, allocate and end; malloc
called by a C function with the GIL released (ctypes); generators and coroutines; fork from a thread; a
sub-interpreter where the interpreter has one; daemon threads and __del__/atexit code still allocating while the
interpreter finalises. Prints a checksum of what it computed."""
import asyncio
import atexit
import ctypes
import os
import sys
import threading
import warnings
import zlib

warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork() of a threaded process

libc = ctypes.CDLL(None)  # CDLL calls release the GIL
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
total = 0


def gil_released_malloc(n):
    kept = []
    for _ in range(n):
        kept.append(libc.malloc(65536))  # NOGIL
    for p in kept:
        libc.free(p)
    return len(kept)


def churn(k):
    return sum(len(bytearray(1000 + i)) for i in range(k))


def gen(n):
    for i in range(n):
        yield bytes(3000 + i)


async def coro(n):
    out = 0
    for i in range(n):
        await asyncio.sleep(0)
        out += len(bytearray(5000))
    return out


total += gil_released_malloc(200)
threads = [threading.Thread(target=churn, args=(300,)) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
total += sum(len(b) for b in gen(300))
total += asyncio.run(coro(200))
total += len(zlib.compress(bytes(range(256)) * 4000))


def fork_from_thread():
    pid = os.fork()
    if pid == 0:
        churn(200)
        os._exit(0)
    os.waitpid(pid, 0)


t = threading.Thread(target=fork_from_thread)
t.start()
t.join()

try:  # sub-interpreters: 3.13 _interpreters, 3.11/3.12 _xxsubinterpreters
    try:
        import _interpreters as subi
        run = subi.run_string if hasattr(subi, "run_string") else subi.exec
    except ImportError:
        import _xxsubinterpreters as subi
        run = subi.run_string
    interp = subi.create()
    run(interp, "x = [bytearray(2000) for _ in range(300)]")
    subi.destroy(interp)
except Exception as e:  # an interpreter without them: nothing to test
    print("no sub-interpreters:", type(e).__name__, file=sys.stderr)


class Late:
    def __del__(self):
        churn(100)  # runs during finalisation


def spin():
    while True:
        bytearray(4000)


threading.Thread(target=spin, daemon=True).start()  # still allocating when the interpreter finalises
late = Late()
atexit.register(churn, 100)
print("checksum", total)
