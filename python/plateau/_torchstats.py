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
  per device (CPU = -1), source PLATEAU_STATS_TORCH_TENSORS. A count costs milliseconds in a PyTorch process, so its
  boundaries are chosen by time (docs/python.md, "When a count runs"): the steady rule runs one when the time since
  the previous count's end is at least (1/budget - 1) times what a typical count takes (the median of the recent
  ones: `budget` of the wall time, PLATEAU_TENSOR_BUDGET, default 0.01 = 1 %; 0 turns it off; _census.pace); the
  early rule adds counts spread over the steps so far (at least 1/SPREAD of them apart) while all counts together
  are charged at most SHORT_FACTOR x budget of the process's wall time, so that a run of a few hundred steps gets
  enough points to be judged.
- What autograd keeps: with the host count, the autograd graphs the counted tensors hold (grad_fn, next_functions;
  parameters' AccumulateGrad nodes left out), as a node count, and the tensors those nodes save (_saved_*
  attributes; each storage once, parameters' left out), as bytes. `total_loss += loss` keeps every
  step's graph through total_loss.grad_fn: the nodes grow though gc sees one tensor.
Nothing here raises into the program.
"""
import itertools
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

SHORT_FACTOR = 5         # the early rule: all counts together take at most SHORT_FACTOR x budget of the wall time
SPREAD = 16              # ... at boundaries at least 1/SPREAD of the boundaries so far apart
MAX_NODES = 20000        # autograd nodes walked per count: past it the node count and bytes are lower bounds
MAX_RELEASED_1X = 2      # saved tensors that cannot be read (released, modified in place) met per count before the
                         # reading stops: torch 1.x (~3 ms each: a C++ backtrace)
MAX_RELEASED = 256       # ... torch >= 2 (a few microseconds each)
F_NODES_CAPPED = 1       # (flags of the autograd figures, PLATEAU_STAT_RESERVED_BYTES of the host record)
F_SAVED_PARTIAL = 2      # saved tensors left unread (after failed reads: released by backward, modified in place):
                         # the bytes are a lower bound

_capacity = {}           # device -> total memory in bytes (NA when unknown)
_budget = None           # fraction of wall time live tensor counts may take; 0 = off
_next_count = 0.0        # time.perf_counter() before which the steady rule runs no count
_t_start = None          # time.perf_counter() of the process's start (the early rule's wall time)
_boundaries = 0          # boundaries seen
_last_boundary = 0       # the boundary of the last count
_costs = []              # what the last _census.RECENT counts took (the next is priced at their median)
_debt = 0.0              # seconds counts took beyond their typical cost, not yet repaid (_census.pace)
_charged = 0.0           # what the counts are charged in all: each at most the typical cost (the early rule's sum)
n_counts = 0             # counts made (tests, bench)
count_seconds = 0.0      # time they took in all
last_count = None        # {device: n} of the last count (tests)
last_autograd = None     # (nodes, saved tensors, saved bytes, flags) of the last count's graphs; saved tensors and
                         # bytes None when not read (tests)
_nodes_before = None     # the nodes of the count before the last
_saved_names = {}        # autograd node type -> its _saved_* attribute names


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


def _process_start():
    """time.perf_counter() at the process's start, from /proc (its start in clock ticks after boot, and the uptime);
    now when that cannot be read."""
    now = time.perf_counter()
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        with open("/proc/uptime", "rb") as f:
            up = float(f.read().split()[0])
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])  # field 22, starttime
        age = up - ticks / float(os.sysconf("SC_CLK_TCK"))
        return now - age if 0 <= age < 1e7 else now
    except Exception:
        return now


def _storage(t):
    """(data pointer, bytes) of t's storage, or None."""
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        p = s.data_ptr()
        n = s.nbytes() if hasattr(s, "nbytes") else s.size() * s.element_size()
        return (p, n) if p else None
    except Exception:
        return None


def _read_saved(torch, node, saved):
    """Add the storages `node` saves to saved ({pointer: bytes}); returns how many of its saved tensors could not be
    read (released by backward, or modified in place since: an optimizer's step on a weight a matmul saved)."""
    tn = type(node)
    names = _saved_names.get(tn)
    if names is None:
        try:
            names = tuple(a for a in dir(tn) if a.startswith("_saved_"))
        except Exception:
            names = ()
        _saved_names[tn] = names
    failed = 0
    for a in names:
        try:
            x = getattr(node, a)
        except Exception:
            failed += 1
            continue
        for y in (x if type(x) in (tuple, list) else (x,)):
            if isinstance(y, torch.Tensor):  # (a torch tensor: never an object with its own __class__)
                st = _storage(y)
                if st is not None:
                    saved[st[0]] = st[1]
    return failed


def autograd_kept(torch, tensors, read=True):
    """(nodes, saved tensors, saved bytes, flags): the autograd nodes reachable from the grad_fn of `tensors` (the
    counted ones; parameters' AccumulateGrad nodes are not counted nor passed), and, when `read`, the storages those
    nodes save (_saved_* attributes), each once, less the parameters' (a tensor the graph saves may also have a
    Python object, which the graph keeps alive: it is counted here too). A saved tensor released by backward
    cannot be read, nor one modified in place since it was saved, and trying raises (on torch 1.x at ~3 ms each: a
    C++ backtrace): graphs are read from their tops (roots no node points to), and after MAX_RELEASED_1X (torch
    1.x) or MAX_RELEASED such reads no more; a node left unread that may save tensors makes the bytes a lower bound
    (F_SAVED_PARTIAL). At most MAX_NODES nodes (F_NODES_CAPPED: both figures are lower bounds). Saved tensors
    and bytes are None when not `read`."""
    roots = []
    for t in tensors:
        try:
            fn = t.grad_fn
        except Exception:
            continue
        if fn is not None:
            roots.append(fn)
    if not roots:
        return 0, 0, 0, 0
    visited = {}   # id -> node (held during the walk so ids stay unique)
    reached = set()  # ids of nodes some node points to: a root among them is inside another root's graph
    flags = 0
    roots.reverse()  # gc's order reversed (it lists its youngest generation first, each oldest first): in the tests
    # this met an accumulator of unreleased graphs before the step's released loss; the order matters only while
    # the failed reads are limited (torch 1.x)
    for root in roots:
        stack = [root]
        while stack:
            node = stack.pop()
            i = id(node)
            if i in visited:
                continue
            if len(visited) >= MAX_NODES:
                flags |= F_NODES_CAPPED
                break
            visited[i] = node
            try:
                nexts = node.next_functions
            except Exception:
                continue
            for nxt, _ in nexts:
                if nxt is not None and type(nxt).__name__ != "AccumulateGrad":
                    reached.add(id(nxt))
                    if id(nxt) not in visited:
                        stack.append(nxt)
        if flags & F_NODES_CAPPED:
            break
    n = len(visited)
    if not read:
        return n, None, None, flags
    # the saved tensors, read from the top graphs (roots no other node points to: `total_loss`, not the step's loss
    # inside it)
    v = getattr(torch, "__version__", "1")
    released_left = MAX_RELEASED_1X if str(v)[:2] in ("0.", "1.") else MAX_RELEASED
    saved = {}     # storage pointer -> bytes
    done = {}
    for root in roots:
        if id(root) in reached or id(root) in done:
            continue
        stack = [root]
        while stack:
            node = stack.pop()
            i = id(node)
            if i in done or i not in visited:
                continue
            done[i] = node
            if released_left > 0:
                released_left -= _read_saved(torch, node, saved)
            elif not flags & F_SAVED_PARTIAL and _saved_names.get(type(node), True):
                flags |= F_SAVED_PARTIAL  # a node that may save tensors was not read
            try:
                nexts = node.next_functions
            except Exception:
                continue
            for nxt, _ in nexts:
                if nxt is not None and id(nxt) not in done and id(nxt) in visited:
                    stack.append(nxt)
    if flags & F_NODES_CAPPED:
        flags |= F_SAVED_PARTIAL
    visited = done = stack = roots = reached = None
    if saved:  # the parameters' storages (leaves that require grad: a weight saved by its matmul) are the model's
        for t in tensors:
            try:
                param = t.is_leaf and t.requires_grad
            except Exception:
                param = False
            st = _storage(t) if param else None
            if st is not None:
                saved.pop(st[0], None)
                if not saved:
                    break
    return n, len(saved), sum(saved.values()), flags


def count_tensors():
    """{device: live torch.Tensor objects} (-1 = CPU and every non-CUDA device), or None without torch; sets
    last_autograd to what the autograd graphs of those tensors keep (autograd_kept)."""
    global last_autograd, _nodes_before
    torch = sys.modules.get("torch")
    Tensor = getattr(torch, "Tensor", None) if torch is not None else None
    if Tensor is None:
        return None
    import gc
    # by type(o), never isinstance(o, ...): isinstance reads o.__class__, which runs the __getattribute__ of objects
    # that define one (torch.distributed.reduce_op then prints a deprecation warning into the program's output)
    objs = gc.get_objects()
    tensors = []
    try:
        cuda = getattr(torch, "cuda", None)
        init = getattr(cuda, "is_initialized", None) if cuda is not None else None
        # two passes in C (map, compress) rather than a Python loop over every object: the types present, which of
        # them are Tensor subclasses (issubclass on the type, never an attribute of the object), then those objects
        kinds = {t: issubclass(t, Tensor) for t in set(map(type, objs))}
        if any(kinds.values()):
            tensors = list(itertools.compress(objs, map(kinds.__getitem__, map(type, objs))))
        del objs, kinds
        try:  # saved tensors are read only while the graphs grow (a read of a released one costs ~3 ms on 1.x):
            # when the last count found more nodes than the one before
            prev = last_autograd[0] if last_autograd is not None else None
            read = prev is not None and _nodes_before is not None and prev > _nodes_before
            ag = autograd_kept(torch, tensors, read=read)
            _nodes_before = prev
            last_autograd = ag
        except Exception:
            last_autograd = None
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
        objs = tensors = None


def _due(now):
    """Whether a count runs at this boundary (the _boundaries-th): the steady rule (`budget` of the wall time, the
    time _census.pace set), or the early rule (at least 1/SPREAD of the boundaries so far since the last count, and
    all counts with this one, each charged at most a typical count's cost (the median of the recent ones), within
    SHORT_FACTOR x budget of the process's wall time). Priced at a typical cost, not the last one's, so one slow
    count (the machine paused it) cannot stop the counts for hundreds of steps; its excess is repaid by the steady
    rule."""
    global _t_start
    if now >= _next_count:
        return True
    if _boundaries - _last_boundary < max(1, _boundaries // SPREAD):
        return False
    if _t_start is None:
        _t_start = _process_start()
    return _charged + _census.typical(_costs) <= SHORT_FACTOR * _budget * (now - _t_start)


def tensors(f):
    """Count live tensors if the schedule allows at this boundary; send one plateau_alloc_stats() per device, the
    host's with what autograd keeps."""
    global _next_count, n_counts, count_seconds, last_count, _boundaries, _last_boundary, _debt, _charged
    budget = _get_budget()
    if budget <= 0:
        return False
    _boundaries += 1
    t0 = time.perf_counter()
    if not _due(t0):
        return False
    counts = count_tensors()
    t1 = time.perf_counter()
    took = max(t1 - t0, 0.0)
    n_counts += 1
    count_seconds += took
    _last_boundary = _boundaries
    _next_count, _debt, charge = _census.pace(_costs, _debt, took, t1, budget)
    _charged += charge
    if counts is None:
        return False
    last_count = counts
    ag = last_autograd
    for d in sorted(counts):
        vals = [NA] * N_VALS
        vals[6] = counts[d]  # PLATEAU_STAT_N_ALLOCATIONS
        if d == -1 and ag is not None:
            vals[7] = ag[0]  # PLATEAU_STAT_N_SEGMENTS: autograd nodes the counted tensors hold
            vals[1] = ag[3]  # PLATEAU_STAT_RESERVED_BYTES: flags (F_NODES_CAPPED, F_SAVED_PARTIAL)
            if ag[1] is not None:  # saved tensors read at this count (else NA)
                vals[0] = ag[2]  # PLATEAU_STAT_ALLOCATED_BYTES: bytes those nodes save that no counted tensor has
                vals[2] = ag[1]  # PLATEAU_STAT_ACTIVE_BYTES: how many such storages
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
