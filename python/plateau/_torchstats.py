"""torch's own counters and live tensor counts, handed to the tracer at each step boundary (docs/python.md,
"torch's counters" and "Live tensors").

Called by plateau/_steps.py right after each boundary it sends, only when the tracer is loaded:
- CUDA: once the program has initialised CUDA (torch.cuda.is_initialized(); this module never initialises it),
  torch.cuda.memory_stats_as_nested_dict(d) for every device d (what torch.cuda.memory_stats(d) flattens: the
  flattening alone makes ~100 key strings and a sorted OrderedDict per call, 7x the cost, and its garbage was what
  pymalloc arenas grew on; memory_stats() when the nested form is missing): allocated, reserved, active,
  inactive_split bytes, live blocks, segments, num_alloc_retries, num_ooms (and the device's total memory, read once per device) go to the tracer's
  plateau_alloc_stats() (include/plateau/step.h), source PLATEAU_STATS_TORCH_CUDA.
- Live tensors: the torch.Tensor objects the garbage collector tracks (gc.get_objects(), O(objects in the heap)),
  per device (CPU = -1), source PLATEAU_STATS_TORCH_TENSORS. A count costs milliseconds in a PyTorch process, so it
  runs at a boundary only when the time since the previous count's end is at least (1/budget - 1) times what that
  count took: counting takes at most `budget` of the wall time (PLATEAU_TENSOR_BUDGET, default 0.01 = 1 %; 0 turns
  it off). Tensors that exist only in C++ (held by the autograd graph, never seen by Python) are not counted; on
  CUDA the allocator's live block count covers them.
Nothing here raises into the program.
"""
import os
import sys
import time

from . import _native
from . import _census  # loaded with this module, not on the step path: an import there holds the import lock,
                       # and a child forked meanwhile would inherit it held (python.fork_step)

# plateau/step.h: sources and value order of plateau_alloc_stats()
SRC_TORCH_CUDA = 1
SRC_TORCH_TENSORS = 2
NA = (1 << 64) - 1
_KEYS = ("allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
         "inactive_split_bytes.all.current", "num_alloc_retries", "num_ooms", "allocation.all.current",
         "segment.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
         "requested_bytes.all.current")
N_VALS = len(_KEYS) + 1  # + the device's capacity

_capacity = {}           # device -> total memory in bytes (NA when unknown)
_budget = None           # fraction of wall time live tensor counts may take; 0 = off
_next_count = 0.0        # time.perf_counter() before which no count runs
n_counts = 0             # counts made (tests, bench)
count_seconds = 0.0      # time they took in all
last_count = None        # {device: n} of the last count (tests)


def _get_budget():
    """PLATEAU_TENSOR_BUDGET, a fraction in [0, 1]; anything else gets the default (0.01) and one note on plateau's
    channel naming the value, like the preload's malformed variables."""
    global _budget
    if _budget is None:
        raw = _native.env("PLATEAU_TENSOR_BUDGET")
        try:
            b = float(raw) if raw is not None else 0.01
        except ValueError:
            b = -1.0
        if not 0.0 <= b <= 1.0:  # NaN too
            _native.note("plateau: PLATEAU_TENSOR_BUDGET=%r is not a fraction in [0, 1]; using the default (0.01)"
                         % (raw,))
            b = 0.01
        _budget = b
    return _budget


def _num(v):
    try:
        v = int(v)
    except Exception:
        return NA
    return v if 0 <= v < NA else NA


def _nested(stats, key):
    for k in key.split("."):
        stats = stats.get(k, NA) if isinstance(stats, dict) else NA
    return stats


def _send(f, source, device, vals):
    import ctypes
    arr = (ctypes.c_uint64 * len(vals))(*vals)
    f(source, device, arr, len(vals))


def cuda_stats(f):
    """One plateau_alloc_stats() per CUDA device, if the program initialised CUDA. Returns how many were sent.
    While plateau's allocator is PyTorch's (plateau.torch.use_allocator()), torch's memory_stats raises: its own
    statistics stand in for torch's (plateau/torch.py, per_step_counters)."""
    for name in (__name__.rpartition(".")[0] + ".torch", "plateau.torch"):  # the bootstrap's copy, the public one
        ours = sys.modules.get(name)
        if getattr(ours, "_active", False) is True and hasattr(ours, "per_step_counters"):
            return ours.per_step_counters(f)
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    if cuda is None:
        return 0
    init = getattr(cuda, "is_initialized", None)
    if init is None or not init():
        return 0
    nested = getattr(cuda, "memory_stats_as_nested_dict", None)
    sent = 0
    for d in range(cuda.device_count()):
        if nested is not None:
            stats = nested(d)
            vals = [_num(_nested(stats, k)) for k in _KEYS] if stats else None
        else:
            stats = cuda.memory_stats(d)
            vals = [_num(stats.get(k, NA)) for k in _KEYS] if stats else None
        if vals is None:
            continue
        if d not in _capacity:
            try:
                _capacity[d] = _num(cuda.get_device_properties(d).total_memory)
            except Exception:
                _capacity[d] = NA
        vals.append(_capacity[d])
        _send(f, SRC_TORCH_CUDA, d, vals)
        sent += 1
    return sent


def count_tensors():
    """{device: live torch.Tensor objects} (-1 = CPU and every non-CUDA device), or None without torch."""
    torch = sys.modules.get("torch")
    Tensor = getattr(torch, "Tensor", None) if torch is not None else None
    if Tensor is None:
        return None
    import gc
    # by type(o), never isinstance(o, ...): isinstance reads o.__class__, which runs the __getattribute__ of objects
    # that define one (torch.distributed.reduce_op then prints a deprecation warning into the program's output)
    kinds = {}  # type -> is a Tensor subclass
    objs = gc.get_objects()
    try:
        cuda = getattr(torch, "cuda", None)
        init = getattr(cuda, "is_initialized", None) if cuda is not None else None
        tensors = []
        for o in objs:
            t = type(o)
            k = kinds.get(t)
            if k is None:
                k = kinds[t] = issubclass(t, Tensor)
            if k:
                tensors.append(o)
        if init is None or not init():  # no CUDA tensor can exist: no per-tensor device look-up
            return {-1: len(tensors)}
        counts = {-1: 0}
        for o in tensors:
            try:
                d = o.get_device()  # -1 for CPU tensors
            except Exception:
                d = -1
            counts[d] = counts.get(d, 0) + 1
        return counts
    finally:
        del objs


def tensors(f):
    """Count live tensors if the budget allows at this boundary; send one plateau_alloc_stats() per device."""
    global _next_count, n_counts, count_seconds, last_count
    budget = _get_budget()
    if budget <= 0:
        return False
    t0 = time.perf_counter()
    if t0 < _next_count:
        return False
    counts = count_tensors()
    t1 = time.perf_counter()
    took = max(t1 - t0, 0.0)
    n_counts += 1
    count_seconds += took
    _next_count = t1 + took * (1.0 / budget - 1.0)
    if counts is None:
        return False
    last_count = counts
    for d in sorted(counts):
        vals = [NA] * N_VALS
        vals[6] = counts[d]  # PLATEAU_STAT_N_ALLOCATIONS
        _send(f, SRC_TORCH_TENSORS, d, vals)
    return True


def on_boundary():
    """After each step boundary the bootstrap sends. Never raises."""
    try:
        f = _native.get("plateau_alloc_stats")
        if f is None:
            return
    except Exception:
        return
    try:
        cuda_stats(f)
    except Exception:
        pass
    try:
        tensors(f)
    except Exception:
        pass
    try:
        _census.on_boundary()  # who keeps a leak (docs/retention.md), within its own time budget
    except Exception:
        pass
