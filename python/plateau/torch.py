"""plateau's caching allocator for PyTorch (docs/python.md, "plateau's allocator for PyTorch").

    import plateau.torch
    plateau.torch.use_allocator()      # before the first CUDA tensor; True when PyTorch now allocates through plateau
    plateau.torch.memory_stats()       # our allocator's statistics, under torch.cuda.memory_stats()'s key names

use_allocator() loads libplateau_alloc.so (allocator/pluggable.c) and makes it torch's CUDA allocator through
torch.cuda.memory.CUDAPluggableAllocator (torch >= 2.0). The library is loaded RTLD_GLOBAL before torch loads it
(torch's ctypes.CDLL is RTLD_LOCAL): the preloaded tracer finds the allocator's pl_alloc_set_hook and
pl_alloc_get_stats only in the global scope, and with them records every device block (with its stack) and one
alloc_stats record per step, as for any plateau allocator in the process. Loaded RTLD_LOCAL, the tracer would see
nothing of it ("pl_alloc_set_hook not found").

torch.cuda.memory_stats() raises for pluggable allocators, so the bootstrap's per-step counters
(plateau/_torchstats.py) read ours instead while it is active: nothing when the tracer records the allocator itself
(it does, see above: sending them too would count every byte twice), our statistics as torch's counters otherwise.

Refusals (one stderr line, use_allocator() returns False, nothing changed): no tracer in the process (outside
`plateau run`: one note per process, shared with plateau.step()), torch < 2.0 or without the pluggable API, no CUDA
device, CUDA already initialised (torch cannot swap an allocator after its first use), libplateau_alloc.so not
found or not loadable. Nothing here raises into the program, and nothing imports torch or ctypes before a call.
"""
import os
import sys

from . import _native

__all__ = ["use_allocator", "memory_stats", "empty_cache", "library_path"]

_STAT_NAMES = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
               "active_bytes", "inactive_split_bytes", "requested_bytes")  # pl_alloc_stats_t order
_POOLS = ("all", "small_pool", "large_pool")                                  # PL_POOL_ALL, _SMALL, _LARGE
_FIELDS = ("current", "peak", "allocated", "freed")                           # pl_stat_t
_COUNTERS = ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "num_device_map",
             "num_device_unmap")
_TAIL = (("largest_free_bytes", "c_size_t"), ("releasable_bytes", "c_size_t"), ("fragmentation", "c_double"),
         ("capacity_bytes", "c_size_t"))  # the fields after _COUNTERS
_OURS = ("num_device_map", "num_device_unmap") + tuple(n for n, _ in _TAIL)  # beyond torch's keys: "plateau.<name>"

_lib = None          # ctypes.CDLL of libplateau_alloc.so once loaded
_path = None         # its path
_active = False      # torch allocates through it
_observed = False    # the preloaded tracer records it itself (its hook entry points are in the global scope)
_Stats = None        # the ctypes mirror of pl_alloc_stats_t, built on first use
# memory_stats() keys in the struct's field order, and the struct.unpack format of all its fields
_KEYS = tuple(["%s.%s.%s" % (n, p, f) for n in _STAT_NAMES for p in _POOLS for f in _FIELDS]
              + [("plateau." if n in _OURS else "") + n for n in _COUNTERS] + ["plateau." + n for n, _ in _TAIL])
_FORMAT = "=%dq" % (len(_KEYS) - len(_TAIL)) + "".join("d" if t == "c_double" else "Q" for _, t in _TAIL)
_SORTED = sorted(range(len(_KEYS)), key=lambda i: _KEYS[i])  # torch's memory_stats() is sorted by key
_SORTED_KEYS = tuple(_KEYS[i] for i in _SORTED)


def _say(line):
    try:
        sys.stderr.write("plateau: plateau.torch.use_allocator(): %s\n" % line)
    except Exception:
        pass


def _stats_type():
    global _Stats
    if _Stats is None:
        import ctypes

        class Stat(ctypes.Structure):  # pl_stat_t (include/plateau/alloc.h)
            _fields_ = [(n, ctypes.c_int64) for n in _FIELDS]

        class Stats(ctypes.Structure):  # pl_alloc_stats_t
            _fields_ = ([(n, Stat * len(_POOLS)) for n in _STAT_NAMES]
                        + [(n, ctypes.c_int64) for n in _COUNTERS]
                        + [(n, getattr(ctypes, t)) for n, t in _TAIL])
        import struct
        assert struct.calcsize(_FORMAT) == ctypes.sizeof(Stats)  # "=" packs like the C struct: 8-byte fields only
        _Stats = Stats
    return _Stats


# ----------------------------------------------------------------------------------------------- finding the library

_NAMES = ("libplateau_alloc.so.0", "libplateau_alloc.so")


def _preload_dir():
    """The directory of the libplateau_preload.so mapped into this process, or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1]
                if path.endswith("/libplateau_preload.so"):
                    return os.path.dirname(path)
    except Exception:
        pass
    return None


def _candidates():
    env = _native.env("PLATEAU_ALLOC_LIB")
    if env:
        return [env]
    dirs = []
    pre = _preload_dir()
    if pre:
        dirs += [pre, os.path.join(pre, "..", "allocator")]  # an install's libdir; a build tree: build/preload
    here = os.path.dirname(os.path.abspath(__file__))  # build/python/plateau in a build tree
    dirs += [os.path.join(here, "..", "..", "allocator"), os.path.join(here, "lib")]  # the wheel's package: lib/
    return [os.path.join(d, n) for d in dirs for n in _NAMES]


def library_path():
    """The libplateau_alloc.so use_allocator() would load: PLATEAU_ALLOC_LIB; else beside the preloaded tracer (an
    install's libdir) or in its build tree (build/allocator), or in the lib/ of the wheel's package; None when none
    exists."""
    for c in _candidates():
        if os.path.isfile(c):
            return os.path.realpath(c)
    return None


# --------------------------------------------------------------------------------------------------- the switch

def _version(torch):
    v = []
    for part in str(getattr(torch, "__version__", "0")).split("+")[0].split(".")[:2]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        v.append(int(digits or 0))
    return tuple(v + [0] * (2 - len(v)))


def _load(path):
    """Load the library into the global scope (see the module's docstring) and type its entry points."""
    global _lib, _path, _observed
    import ctypes
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    for name in ("plateau_torch_malloc", "plateau_torch_free", "plateau_torch_stats"):
        getattr(lib, name)  # AttributeError: not plateau's allocator library
    lib.plateau_torch_stats.argtypes = [ctypes.c_int, ctypes.POINTER(_stats_type())]
    lib.plateau_torch_stats.restype = ctypes.c_int
    lib.plateau_torch_empty_cache.argtypes = [ctypes.c_int]
    lib.plateau_torch_empty_cache.restype = ctypes.c_int
    lib.plateau_torch_last_error.restype = ctypes.c_char_p
    glob = ctypes.CDLL(None)
    _observed = (_native.get("plateau_step") is not None and hasattr(glob, "plateau_alloc_observer")
                 and hasattr(glob, "pl_alloc_set_hook") and hasattr(glob, "pl_alloc_get_stats"))
    _lib, _path = lib, path
    return lib


def use_allocator():
    """Make plateau's caching allocator PyTorch's CUDA allocator. Call it before anything uses CUDA. Returns True
    when PyTorch now allocates through plateau (also when it already did), False after one line on stderr saying
    why not; then nothing changed. Outside `plateau run` it does nothing (one note per process)."""
    global _active
    if _active:
        return True
    try:
        if _native.get("plateau_step") is None:
            _native.note_absent("plateau.torch.use_allocator()")
            return False
        torch = sys.modules.get("torch")
        if torch is None:
            import torch
        memory = getattr(getattr(torch, "cuda", None), "memory", None)
        pluggable = getattr(memory, "CUDAPluggableAllocator", None)
        change = getattr(memory, "change_current_allocator", None)
        if _version(torch) < (2, 0) or pluggable is None or change is None:
            _say("needs torch >= 2.0 (torch.cuda.memory.CUDAPluggableAllocator); this is torch %s: PyTorch's own "
                 "allocator stays" % getattr(torch, "__version__", "?"))
            return False
        if torch.cuda.is_initialized():
            _say("CUDA is already initialised, and torch cannot switch allocators after their first use: call it "
                 "before the first CUDA tensor; PyTorch's own allocator stays")
            return False
        if not torch.cuda.is_available():
            _say("torch sees no CUDA device: PyTorch's own allocator stays")
            return False
        path = library_path()
        if path is None:
            _say("libplateau_alloc.so not found (looked in %s); set PLATEAU_ALLOC_LIB to its path: PyTorch's own "
                 "allocator stays" % ", ".join(sorted(set(os.path.dirname(c) for c in _candidates()))))
            return False
        try:
            _load(path)
        except (OSError, AttributeError) as e:
            _say("cannot load %s (%s): PyTorch's own allocator stays" % (path, e))
            return False
        change(pluggable(path, "plateau_torch_malloc", "plateau_torch_free"))
        _active = True
        return True
    except Exception as e:
        _say("%s: %s: PyTorch's own allocator stays" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
        return False


# ---------------------------------------------------------------------------------------------------- statistics

def _device_index(device):
    if device is None:
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        try:
            if cuda is not None and cuda.is_initialized():
                return int(cuda.current_device())
        except Exception:
            pass
        return 0
    if isinstance(device, int):
        return device
    if isinstance(device, str):  # "cuda:1", "cuda"
        return int(device.rsplit(":", 1)[1]) if ":" in device else 0
    index = getattr(device, "index", None)  # torch.device("cuda:1"); None for torch.device("cuda")
    return int(index) if index is not None else 0


def _raw(device):
    """pl_alloc_stats_t of `device`, or None (allocator not active, or the device never allocated)."""
    if not _active or _lib is None:
        return None
    import ctypes
    s = _stats_type()()
    if _lib.plateau_torch_stats(device, ctypes.byref(s)) != 0:
        return None
    return s


def memory_stats(device=None):
    """Our allocator's statistics for `device` (None: the current one) as torch.cuda.memory_stats() would give
    them: a dict sorted by key with allocated_bytes.all.current, reserved_bytes.large_pool.peak, ...,
    num_alloc_retries, num_ooms, num_device_alloc, num_device_free, plus plateau's own under "plateau.":
    largest_free_bytes, releasable_bytes, fragmentation, capacity_bytes, num_device_map, num_device_unmap.
    Empty when the allocator is not active or the device has not allocated yet (torch's is empty before CUDA
    starts)."""
    try:
        s = _raw(_device_index(device))
    except Exception:
        s = None
    if s is None:
        return {}
    vals = _values(s)
    return dict(zip(_SORTED_KEYS, [vals[i] for i in _SORTED]))


def _values(s):
    """Every field of the pl_alloc_stats_t `s`, in _KEYS order: one struct.unpack, where ctypes' per-field reads
    cost ~10 times more (memory_stats() went from ~200 to ~35 us under the tracer)."""
    import struct
    return struct.unpack(_FORMAT, bytes(s))


def empty_cache(device=None):
    """Give back every cached block of `device` (torch.cuda.empty_cache() does not reach a pluggable allocator).
    False when the allocator is not active or the device never allocated."""
    try:
        return bool(_active and _lib is not None and _lib.plateau_torch_empty_cache(_device_index(device)) == 0)
    except Exception:
        return False


def per_step_counters(f):
    """The bootstrap's per-step counters while our allocator is active (plateau/_torchstats.py, instead of
    torch.cuda.memory_stats, which raises for it): one plateau_alloc_stats() per device that allocated, unless the
    tracer records the allocator itself. Returns how many were sent."""
    if _observed:
        return 0
    from . import _torchstats as ts
    # torch's counters in plateau/step.h's order ("allocated_bytes.all.current", ..., "num_ooms", ...), then the
    # device's capacity: their places in _KEYS
    index = [_KEYS.index(k) for k in ts._KEYS + ("plateau.capacity_bytes",)]
    torch = sys.modules.get("torch")
    try:
        n = int(torch.cuda.device_count())
    except Exception:
        n = 1
    sent = 0
    for d in range(n):
        s = _raw(d)
        if s is None:
            continue
        v = _values(s)
        ts._send(f, ts.SRC_TORCH_CUDA, d, [ts._num(v[i]) for i in index])
        sent += 1
    return sent
