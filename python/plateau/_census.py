"""Who keeps it: a census of the references that can hold a Python leak (docs/retention.md).

Called by plateau/_torchstats.py after each step boundary the bootstrap sends, only when the tracer is loaded. Within a
time budget (PLATEAU_CENSUS_BUDGET, default 0.01 = 1 % of wall time, 0 turns it off; the same rule as the live tensor
count) it walks, from the roots a user can name:
- the globals of the program's own modules (not the standard library, site-packages/dist-packages, nor plateau),
- the locals of the running frames of every thread that run the program's own code (generators' frames too),
- the closure cells and default arguments of the program's functions, and class attributes of its classes,
- instance __dict__s reachable from those (nn.Module children by their names), and containers' items,
down to MAX_DEPTH, and sizes every holder it meets: a container by its items, a tensor by the nodes of its autograd
graph (grad_fn, next_functions; at most MAX_NODES_HOLDER), each with the bytes of tensor storage it keeps (its
tensors', and the saved tensors of its graph; each storage counted once per holder). A container's tensors are read
from its first MAX_ITEMS_SIZED items and the graphs of its oldest and newest GRAPH_SAMPLE items, extrapolated. Holders are keyed by their path ("model.history",
"total_loss"), not by object: `total_loss += loss` makes a new tensor every step.
A holder whose size grew since the previous census is reported to the tracer (plateau_retention, include/plateau/
step.h) with its earlier sizes, and then at every census while it is reachable; the report decides whether it grew
in step with the steps (reports/model/retention.c). For a reported holder the line that grows it is read from the code
objects of the program (dis): a `+=` stored into its name, an `.append`/`.extend`/`[k] = ...` on it, a store into
its attribute; when several lines do, the first is given and flagged as a guess.
Rules (the program never notices): between censuses nothing but ints and strings is kept; no module is imported
that the program has not imported (dis only when already in sys.modules); nothing printed; nothing raises out of
here; frame locals snapshots made by reading f_locals (Python < 3.13) are emptied after use so no object outlives
its scope because of the census. A census stops short at MAX_OBJECTS objects or MAX_SECONDS, and says so.
The budgeted schedule's steady rule (pace: the next run priced at a typical run's cost) is here, shared with the live
tensor count (plateau/_torchstats.py imports this module).
"""
import os
import sys
import time

from . import _native

MAX_DEPTH = 6          # attribute/item hops from a root
MAX_OBJECTS = 200000   # objects visited per census
MAX_SECONDS = 0.25     # wall time per census before it stops short
MAX_ITEMS_DESCEND = 64  # items of one container descended into (the first and last halves)
MAX_ITEMS_SIZED = 1024  # items of one container scanned for tensors (bytes are extrapolated past it)
GRAPH_SAMPLE = 8        # oldest and newest items of a container whose autograd graphs are walked (extrapolated)
MAX_NODES = 50000      # autograd nodes walked per census, all holders together (each held during the census)
MAX_NODES_HOLDER = 5000  # autograd nodes walked per holder: past it, its size is a lower bound (F_NODES_CAPPED)
MAX_RELEASED = 8       # saved tensors found released by backward per census before the rest are skipped
MAX_REPORTED = 12      # holders reported per census
MAX_RANGES = 32        # storages (data pointer, bytes) sent with a reported holder: its largest (trace 1.9)
HISTORY = 2            # censuses remembered per holder (sizes only): a holder is reported at its first growth,
                       # with the size it had at the census before
MAX_TRACKED = 20000    # holders whose sizes are remembered between censuses (the first met); the rest are not judged

F_SHORT = 1            # the census stopped short (objects or time)
F_GUESS = 2            # the line is one of several candidates
F_ESTIMATED = 4        # bytes or graph nodes extrapolated from some of a container's items
F_NODES_CAPPED = 8     # the graph walk hit MAX_NODES_HOLDER or MAX_NODES: nodes and bytes are lower bounds

NA = (1 << 64) - 1

RECENT = 5             # the schedule: costs remembered; the next run is priced at their median (see pace)
STRETCH = 4            # ... a gap that repays outliers' excess is at most STRETCH typical gaps

_budget = None
_next = 0.0              # time.perf_counter() before which no census runs
_costs = []              # what the last RECENT censuses took
_debt = 0.0              # seconds censuses took beyond their typical cost, not yet repaid
n_census = 0             # censuses made (tests, bench)
census_seconds = 0.0     # time they took in all
_hist = {}               # path -> [(census, items, nodes, bytes, flags)], the last HISTORY censuses it was seen
_meta = {}               # path -> (what, kind) of reported holders: how it was named when last seen
_reported = {}           # path -> (file, line, fix, flags) of holders reported to the tracer
last = None              # {path: (items, nodes, bytes)} of the last census (tests)
last_short = False

_HERE = os.path.dirname(os.path.abspath(__file__))
_SKIP_DIRS = None
_own_cache = {}


def _get_budget():
    global _budget
    if _budget is None:
        try:
            b = float(_native.env("PLATEAU_CENSUS_BUDGET") or "0.01")
        except ValueError:
            b = 0.01
        _budget = min(max(b, 0.0), 1.0) if b == b else 0.01
    return _budget


def typical(costs):
    """A typical cost among `costs` (recent costs, in seconds): their median, the lower one of an even number, so that
    one outlier among two or more never sets the price. 0.0 when none."""
    if not costs:
        return 0.0
    c = sorted(costs)
    return c[(len(c) - 1) // 2]


def pace(costs, debt, took, t1, budget):
    """The steady rule of a budgeted schedule (this census, plateau/_torchstats.py's live tensor count; docs/python.md,
    "When a count runs"), after a run that took `took` s and ended at `t1`: returns (the time before which no run
    starts, the debt, what the run is charged), and keeps `costs` (a list, changed in place) at the last RECENT
    costs. The next run is priced at a typical cost (typical()), not at the last one: one run slowed by the machine
    or a passing big heap would otherwise stop the schedule for (1/budget - 1) times that run, hundreds of steps. So
    the gap is (1/budget - 1) x the typical cost: the typical run takes `budget` of the wall time. What a run took
    beyond the typical cost is a debt, repaid by stretching the following gaps, each by at most (STRETCH - 1) typical
    gaps: a stretch of w seconds repays budget x w, what the budget earns in it while nothing runs. Over the run the
    runs take `budget` of the wall time, and no gap is longer than STRETCH typical ones. A run is charged at most the
    typical cost (the early rule's sum, plateau/_torchstats.py)."""
    costs.append(took)
    if len(costs) > RECENT:
        del costs[0]
    typ = typical(costs)
    debt += max(took - typ, 0.0)
    gap = typ * (1.0 / budget - 1.0) if budget > 0 else 0.0
    repay = min(debt, budget * gap * (STRETCH - 1))
    if repay > 0:
        gap += repay / budget
        debt -= repay
    return t1 + gap, debt, min(took, typ)


def _skip_dirs():
    global _SKIP_DIRS
    if _SKIP_DIRS is None:
        dirs = [os.path.dirname(_HERE)]
        for m in ("os", "sys"):
            f = getattr(sys.modules.get(m), "__file__", None)
            if f:
                dirs.append(os.path.dirname(os.path.abspath(f)))
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix):
            dirs.append(os.path.join(p, "lib"))
        _SKIP_DIRS = tuple(d.rstrip("/") + "/" for d in dirs if d)
    return _SKIP_DIRS


def _own(filename):
    """Whether code in `filename` is the program's own (not the standard library, installed packages, plateau)."""
    r = _own_cache.get(filename)
    if r is None:
        f = filename or ""
        r = bool(f) and not f.startswith("<") and "site-packages" not in f and "dist-packages" not in f
        if r:
            a = os.path.abspath(f)
            r = not a.startswith(_skip_dirs())
        _own_cache[filename] = r
    return r


def _short(filename):
    return os.path.basename(filename or "?")


class _Walk:
    """One census: the objects met, the holders sized. Dropped (with every reference it took) when the census ends."""

    def __init__(self, torch, deadline):
        self.torch = torch
        self.Tensor = getattr(torch, "Tensor", None) if torch is not None else None
        Module = None
        nn = getattr(torch, "nn", None) if torch is not None else None
        if nn is not None:
            Module = getattr(nn, "Module", None)
        self.Module = Module
        coll = sys.modules.get("collections")
        self.deque = getattr(coll, "deque", None) if coll is not None else None
        self.deadline = deadline
        self.seen = {}        # id -> object (held so ids stay unique during the census)
        self.n_objects = 0
        self.n_nodes = 0
        self.short = False
        self.nodes_capped = False
        self.n_released = 0
        self.holders = {}     # path -> [items, nodes, bytes, what, kind, flags, ranges]
        self.kinds = {}       # type -> 'tensor' | 'list' | ... | 'object' | None
        self.saved_names = {}  # node type -> names of its _saved_ attributes
        self.codes = []       # code objects of the program's running frames (for the line)
        self.func_t = type(_get_budget)
        self.gen_t = None

    # ---- what an object is ----
    def kind(self, o):
        t = type(o)
        k = self.kinds.get(t)
        if k is None:
            k = "object"
            if self.Tensor is not None and issubclass(t, self.Tensor):
                k = "tensor"
            elif issubclass(t, dict):
                k = "dict"
            elif issubclass(t, list):
                k = "list"
            elif issubclass(t, (set, frozenset)):
                k = "set"
            elif self.deque is not None and issubclass(t, self.deque):
                k = "deque"
            elif issubclass(t, tuple):
                k = "tuple"
            elif issubclass(t, (int, float, complex, str, bytes, bool, type(None), type(sys))) or \
                    t is type or issubclass(t, type):
                k = None
            elif t is self.func_t:
                k = "function"
            elif t.__name__ == "generator":
                k = "generator"
            self.kinds[t] = k
        return k

    def over(self):
        if self.n_objects >= MAX_OBJECTS or time.perf_counter() > self.deadline:
            self.short = True
        return self.short

    # ---- sizes ----
    def storage(self, t, acc):
        """Add t's storage to acc (data_ptr -> bytes) once."""
        try:
            s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
            p = s.data_ptr()
            if p and p not in acc:
                acc[p] = s.nbytes() if hasattr(s, "nbytes") else s.size() * s.element_size()
        except Exception:
            pass

    def graph(self, t, acc, visited, limit):
        """(nodes, capped): the nodes of t's autograd graph not yet in `visited` (id -> node), at most `limit`,
        adding the tensors they save to acc."""
        try:
            fn = t.grad_fn
        except Exception:
            return 0, False
        if fn is None:
            return 0, False
        n = 0
        stack = [fn]
        while stack:
            node = stack.pop()
            if node is None or id(node) in visited:
                continue
            if self.n_nodes >= MAX_NODES or n >= limit:
                self.nodes_capped = True
                return n, True
            visited[id(node)] = node
            self.n_nodes += 1
            n += 1
            tn = type(node)
            names = self.saved_names.get(tn)
            if names is None:
                try:
                    names = self.saved_names[tn] = tuple(a for a in dir(tn) if a.startswith("_saved_"))
                except Exception:
                    names = self.saved_names[tn] = ()
            for a in names:
                if self.n_released >= MAX_RELEASED:
                    break
                try:
                    v = getattr(node, a)
                except Exception:  # released by backward (a costly exception in torch 1.x: a C++ backtrace)
                    self.n_released += 1
                    break
                if self.kind(v) == "tensor":
                    self.storage(v, acc)
                elif type(v) in (tuple, list):
                    for x in v:
                        if self.kind(x) == "tensor":
                            self.storage(x, acc)
            try:
                for nxt, _ in node.next_functions:
                    if nxt is not None and id(nxt) not in visited:
                        if type(nxt).__name__ == "AccumulateGrad":  # a leaf (parameter): model state, not kept
                            continue
                        stack.append(nxt)
            except Exception:
                pass
        return n, False

    def tensors_in(self, x):
        """The tensors an item is or directly holds (a tuple or list of at most 16)."""
        xk = self.kind(x)
        if xk == "tensor":
            return (x,)
        if xk in ("tuple", "list") and len(x) <= 16:
            return tuple(y for y in x if self.kind(y) == "tensor")
        return ()

    def size(self, o, k):
        """(items, nodes, bytes, flags, ranges) of a holder; ranges: its largest storages seen, ((ptr, bytes), ...)."""
        acc, visited, flags = {}, {}, 0
        if k == "tensor":
            self.storage(o, acc)
            nodes, capped = self.graph(o, acc, visited, MAX_NODES_HOLDER)
            return NA, nodes, sum(acc.values()), F_NODES_CAPPED if capped else 0, _largest(acc, {})
        try:
            n = len(o)
        except Exception:
            return NA, NA, NA, flags, ()
        vals = o.values() if k == "dict" else o
        scanned = 0
        try:  # the storage of the tensors among the first MAX_ITEMS_SIZED items
            for x in vals:
                if scanned >= MAX_ITEMS_SIZED:
                    break
                scanned += 1
                for y in self.tensors_in(x):
                    self.storage(y, acc)
        except Exception:  # changed size while iterated (another thread)
            pass
        b = sum(acc.values())
        if scanned and scanned < n:
            b = b * n // scanned
            flags |= F_ESTIMATED
        # the graphs of the oldest and newest GRAPH_SAMPLE items, extrapolated to every item
        sample = []
        try:
            it = iter(vals)
            for _ in range(min(n, GRAPH_SAMPLE)):
                sample.append(next(it))
            if n > GRAPH_SAMPLE:
                rit = reversed(vals)  # (a set has no order: its first items only)
                for _ in range(min(n - GRAPH_SAMPLE, GRAPH_SAMPLE)):
                    sample.append(next(rit))
        except Exception:
            pass
        nodes, capped, saved = 0, False, {}
        for x in sample:
            for y in self.tensors_in(x):
                g, c = self.graph(y, saved, visited, MAX_NODES_HOLDER - nodes)
                nodes += g
                capped = capped or c
        del sample
        b += sum(v for p, v in saved.items() if p not in acc)
        if nodes and len(visited) and n > 2 * GRAPH_SAMPLE:
            nodes = nodes * n // (2 * GRAPH_SAMPLE)
            flags |= F_ESTIMATED
        return n, nodes, b, flags | (F_NODES_CAPPED if capped else 0), _largest(acc, saved)

    def add_holder(self, o, k, path, what):
        if path in self.holders:
            return
        items, nodes, b, flags, ranges = self.size(o, k)
        if k == "tensor" and not nodes:
            return  # a tensor without a graph is sized by whoever holds it, not named by itself
        name = type(o).__name__ if k in ("dict", "list", "set", "deque") else k
        self.holders[path] = [items, nodes, b, what, name, flags, ranges]

    # ---- the walk ----
    def visit(self, o, path, what, depth):
        if self.over():
            return
        k = self.kind(o)
        if k is None:
            return
        i = id(o)
        if i in self.seen:
            return
        self.seen[i] = o
        self.n_objects += 1
        if k in ("list", "dict", "set", "deque") or (k == "tensor" and not what.startswith("item of")):
            self.add_holder(o, k, path, what)  # (a container's tensors are sized with the container)
        if depth >= MAX_DEPTH:
            return
        if k == "tensor":  # a leaf's (parameter's) .grad: its graph grows when gradients are made with create_graph
            try:
                g = o.grad if o.is_leaf and o.requires_grad else None  # (.grad of a non-leaf warns: never read)
            except Exception:
                g = None
            if g is not None:
                self.visit(g, path + ".grad", "gradient of " + path, depth + 1)
            return
        if k in ("list", "tuple", "deque"):
            try:
                n = len(o)
                half = MAX_ITEMS_DESCEND // 2
                idx = range(n) if n <= MAX_ITEMS_DESCEND else list(range(half)) + list(range(n - half, n))
                for j in idx:
                    self.visit(o[j], "%s[%d]" % (path, j), "item of " + path, depth + 1)
            except Exception:
                pass
        elif k == "dict":
            self.visit_dict(o, path, depth)
        elif k == "function":
            self.visit_function(o, path, depth)
        elif k == "generator":
            fr = getattr(o, "gi_frame", None)
            if fr is not None and _own(fr.f_code.co_filename):
                self.visit_locals(fr, path + ".", "local of generator %s() in %s" % (
                    fr.f_code.co_name, _short(fr.f_code.co_filename)), depth + 1)
        elif k == "object":
            try:
                d = object.__getattribute__(o, "__dict__")
            except Exception:
                return
            if type(d) is not dict:
                return
            cls = type(o).__name__
            mod = self.Module is not None and issubclass(type(d.get("_modules")), dict) and "_parameters" in d
            for a, v in _ends(d.items(), len(d), 128) or ():
                if type(a) is not str:
                    continue
                if mod and a in ("_modules", "_parameters", "_buffers") and type(v) is not list:
                    try:
                        for kk, vv in _ends(v.items(), len(v), 128) or ():
                            if vv is not None:
                                self.visit(vv, "%s.%s" % (path, kk), "%s of %s" % (
                                    "attribute", cls), depth + 1)
                    except Exception:
                        pass
                    continue
                self.visit(v, "%s.%s" % (path, a), "attribute of " + cls, depth + 1)

    def visit_dict(self, o, path, depth):
        items = _ends(o.items(), len(o), MAX_ITEMS_DESCEND // 2)
        if items is None:
            return
        for kk, vv in items:
            if type(kk) is str:
                key = repr(kk) if len(kk) <= 40 else "'%s...'" % kk[:37]
            elif type(kk) is int:
                key = str(kk)
            else:
                key = "..."
            self.visit(vv, "%s[%s]" % (path, key), "item of " + path, depth + 1)

    def visit_function(self, f, path, depth):
        code = getattr(f, "__code__", None)
        if code is None or not _own(code.co_filename):
            return
        where = "%s() in %s" % (code.co_name, _short(code.co_filename))
        cells = getattr(f, "__closure__", None) or ()
        for name, cell in zip(code.co_freevars, cells):
            try:
                v = cell.cell_contents
            except ValueError:  # empty cell
                continue
            self.visit(v, "%s.%s" % (path, name), "closure cell of " + where, depth + 1)
        defaults = getattr(f, "__defaults__", None) or ()
        if defaults:
            names = code.co_varnames[code.co_argcount - len(defaults):code.co_argcount]
            for name, v in zip(names, defaults):
                self.visit(v, "%s.%s" % (path, name), "default argument of " + where, depth + 1)
        kw = getattr(f, "__kwdefaults__", None) or {}
        for name, v in list(kw.items()):
            self.visit(v, "%s.%s" % (path, name), "default argument of " + where, depth + 1)

    def visit_locals(self, fr, prefix, what, depth):
        code = fr.f_code
        try:
            loc = fr.f_locals
        except Exception:
            return
        try:
            for name, v in list(loc.items()):
                if type(name) is str:
                    self.visit(v, prefix + name, what, depth)
        finally:
            # Python < 3.13: f_locals of a function frame is a snapshot dict kept on the frame; empty it, so no
            # object lives longer for being in it (3.13's f_locals is a live proxy: never cleared)
            if type(loc) is dict and (code.co_flags & 1) and sys.version_info < (3, 13) and loc is not fr.f_globals:
                loc.clear()
            del loc

    def visit_class(self, cls, mod_file, depth):
        try:
            d = dict(vars(cls))
        except Exception:
            return
        for a, v in d.items():
            if type(a) is not str or (a.startswith("__") and a.endswith("__")):
                continue
            p = "%s.%s" % (cls.__name__, a)
            if self.kind(v) == "function":
                self.visit_function(v, p, depth + 1)
            else:
                self.visit(v, p, "class attribute of " + cls.__name__, depth + 1)

    def run(self):
        mods = []
        for name, m in list(sys.modules.items()):
            try:
                d = m.__dict__
                f = d.get("__file__") if type(d) is dict else None
            except Exception:
                continue
            if f and type(f) is str and _own(f):
                mods.append((m, d, f))
        for m, d, f in mods:
            where = "global in " + _short(f)
            for a, v in list(d.items()):
                if self.short:
                    break
                if type(a) is not str or (a.startswith("__") and a.endswith("__")):
                    continue
                k = self.kind(v)
                if k == "function":
                    self.visit_function(v, a, 0)
                elif k is None and issubclass(type(v), type) and v.__dict__.get("__module__") == d.get("__name__"):
                    self.visit_class(v, f, 0)
                else:
                    self.visit(v, a, where, 0)
        # locals of the running frames of every thread, outermost first: an object
        # reachable from a global, or from an outer frame, is named from there (`trainer.state`, not `self.state`)
        try:
            frames = list(sys._current_frames().values())
        except Exception:
            frames = []
        top = fr = chain = None
        for top in frames:
            chain, fr = [], top
            while fr is not None:
                chain.append(fr)
                fr = fr.f_back
            for fr in reversed(chain):
                if self.short:
                    break
                code = fr.f_code
                if _own(code.co_filename):
                    self.codes.append(code)
                    if code.co_flags & 1:  # a function's frame (module frames' locals are its globals, above)
                        self.visit_locals(fr, "", "local of %s() in %s" % (code.co_name, _short(code.co_filename)),
                                          0)
            del chain, fr
        del frames, top
        self.mods = mods


def _ends(view, n, k):
    """The first k and the last k entries of a dict view of n entries (all when n <= 2k), without copying the rest;
    None when it changed while read."""
    try:
        if n <= 2 * k:
            return list(view)
        it, first = iter(view), []
        for _ in range(k):
            first.append(next(it))
        try:
            rit = reversed(view)  # Python >= 3.8
        except TypeError:
            return first
        last = [next(rit) for _ in range(k)]
        last.reverse()
        return first + last
    except Exception:
        return None


# ---- the line that grows a holder (static reading of the program's code objects) ----
_GROW_METHODS = ("append", "extend", "insert", "add", "update", "setdefault", "appendleft", "__setitem__")
_INPLACE = ("INPLACE_ADD", "INPLACE_SUBTRACT", "INPLACE_MULTIPLY")


def _line_of(ins, cur):
    pos = getattr(ins, "positions", None)
    ln = getattr(pos, "lineno", None) if pos is not None else None
    if ln:
        return ln
    ln = getattr(ins, "line_number", None)
    if ln:
        return ln
    s = ins.starts_line
    return s if type(s) is int and s is not True and s is not False else cur


def _largest(acc, more):
    """The MAX_RANGES largest storages of acc and more ({ptr: bytes}) as a tuple of (ptr, bytes), largest first: the
    ones a byte-sampling tracer most likely sampled."""
    r = sorted(list(acc.items()) + [kv for kv in more.items() if kv[0] not in acc], key=lambda kv: -kv[1])
    return tuple(r[:MAX_RANGES])


def _all_codes(codes):
    out, seen, stack = [], set(), list(codes)
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        for k in c.co_consts:
            if type(k) is type(c):
                stack.append(k)
    return out


def _is_inplace(ins):
    return ins.opname in _INPLACE or (ins.opname == "BINARY_OP" and ins.argrepr.endswith("=") and
                                      ins.argrepr not in ("==", "!=", "<=", ">="))


def _expr(ins, i, then=("CALL", "PRECALL", "STORE", "BINARY_OP", "INPLACE", "LIST_APPEND")):
    """The dotted name loaded from ins[i] on (`loss`, `trainer.loss`, `self.state`) when the instruction after it
    starts with one of `then`, else None."""
    name = _operand(ins[i]) if i < len(ins) and ins[i].opname != "LOAD_ATTR" else None
    if name is None:
        return None
    j = i + 1
    while j < len(ins) and ins[j].opname in ("LOAD_ATTR", "LOAD_METHOD") and type(ins[j].argval) is str and \
            ins[j].argval not in _GROW_METHODS:
        if ins[j].opname == "LOAD_METHOD":
            return None  # a call, not a name
        name += "." + ins[j].argval
        j += 1
    if j < len(ins) and ins[j].opname.startswith(then):
        return name
    return None


def _operand(ins):
    """The name loaded by a LOAD_* instruction, or None."""
    if ins.opname.startswith("LOAD_") and ins.opname not in ("LOAD_CONST",) and type(ins.argval) is str:
        return ins.argval
    if ins.opname == "LOAD_FAST_LOAD_FAST" and type(ins.argval) is tuple:
        return ins.argval[-1]
    return None


def _sites(dis, codes, name, attr):
    """Lines that grow `name` (a plain name when not attr, else an attribute name): [(file, line, how, operand)]."""
    out = []
    for c in codes:
        try:
            ins = list(dis.get_instructions(c))
        except Exception:
            continue
        cur = c.co_firstlineno
        lines = []
        for i, x in enumerate(ins):
            cur = _line_of(x, cur)
            lines.append(cur)
        for i, x in enumerate(ins):
            op, av = x.opname, x.argval
            stores = ("STORE_ATTR",) if attr else ("STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF")
            if op in stores and av == name:
                if i >= 1 and _is_inplace(ins[i - 1]):
                    src = _operand(ins[i - 2]) if i >= 2 else None
                    out.append((c.co_filename, lines[i], "+=", src))
                    continue
                # `x = f(x, y)`: a store whose own line reads the name it stores (an update that chains graphs)
                j, reads, src = i - 1, False, None
                while j >= 0 and lines[j] == lines[i]:
                    nm = _operand(ins[j])
                    if nm == name and (ins[j].opname == "LOAD_ATTR") == attr:
                        reads = True
                    elif nm is not None and src is None and not attr and ins[j].opname in (
                            "LOAD_FAST", "LOAD_NAME", "LOAD_DEREF"):
                        src = nm  # the last other name read on the line: what the update takes in
                    j -= 1
                if reads or attr:
                    out.append((c.co_filename, lines[i], "=x" if reads else "=", src if reads else None))
                continue
            if op in ("LOAD_METHOD", "LOAD_ATTR") and av in _GROW_METHODS and i >= 1:
                p = ins[i - 1]
                if p.opname == "BINARY_SUBSCR" and i >= 3 and ins[i - 2].opname == "LOAD_CONST":
                    p = ins[i - 3]  # name[const].append(...)
                if _operand(p) == name and ((p.opname == "LOAD_ATTR") == attr or
                                            (attr and p.opname == "LOAD_METHOD")):
                    j = i + 1
                    while j < len(ins) and ins[j].opname in ("PUSH_NULL", "PRECALL"):
                        j += 1
                    out.append((c.co_filename, lines[i], "." + av, _expr(ins, j)))
                continue
            if op == "STORE_SUBSCR":
                for j in (i - 2, i - 3):
                    if j >= 0 and _operand(ins[j]) == name and ((ins[j].opname == "LOAD_ATTR") == attr):
                        v = j - 1 if ins[j].opname != "LOAD_ATTR" else j - 2  # the value is loaded before it
                        while v > 0 and ins[v].opname == "LOAD_ATTR":
                            v -= 1
                        out.append((c.co_filename, lines[i], "[]=", _expr(ins, v, ("LOAD_",)) if v >= 0 else None))
                        break
    dedup = []
    for s in out:
        if s not in dedup:
            dedup.append(s)
    return dedup


def _line(walk, path, what, kind, has_graph):
    """(file, line, fix, flags) for a reported holder; ("", 0, "", 0) when no honest source is found."""
    dis = sys.modules.get("dis")
    if dis is None:
        return "", 0, "", 0
    codes = list(walk.codes)
    for m, d, f in walk.mods:
        for v in list(d.values()):
            k = walk.kind(v)
            if k == "function" and _own(v.__code__.co_filename):
                codes.append(v.__code__)
            elif issubclass(type(v), type) and v.__dict__.get("__module__") == d.get("__name__"):
                for a in list(vars(v).values()):
                    c = getattr(a, "__code__", None) or getattr(getattr(a, "__func__", None), "__code__", None)
                    if c is not None:
                        codes.append(c)
    codes = _all_codes(codes)
    last = path.rsplit(".", 1)[-1].split("[", 1)[0]
    attr = "." in path and not what.startswith(("local", "closure", "default"))
    hooks = last in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks")
    if hooks:
        reg = {"_forward_hooks": "register_forward_hook", "_forward_pre_hooks": "register_forward_pre_hook",
               "_backward_hooks": "register_full_backward_hook"}[last]
        sites = []
        for c in codes:
            try:
                for x in dis.get_instructions(c):
                    if x.opname in ("LOAD_METHOD", "LOAD_ATTR") and x.argval in (reg, "register_backward_hook"):
                        sites.append((c.co_filename, _line_of(x, c.co_firstlineno), "hook", None))
            except Exception:
                pass
        fix = "register the hook once (or keep its handle and call .remove())"
    elif last == "grad" and what.startswith("gradient"):
        # a .grad whose graph grows: gradients accumulated with create_graph=True and never reset. The honest line is
        # the call that passes create_graph (its keyword names are a constant tuple: KW_NAMES on 3.11-3.12, LOAD_CONST
        # before CALL_KW / CALL_FUNCTION_KW elsewhere)
        sites = []
        for c in codes:
            try:
                cur = c.co_firstlineno
                for x in dis.get_instructions(c):
                    cur = _line_of(x, cur)
                    v = x.argval
                    if x.opname == "KW_NAMES" and type(v) is not tuple:  # 3.11's dis leaves it unresolved
                        v = c.co_consts[x.arg] if x.arg is not None and x.arg < len(c.co_consts) else None
                    if type(v) is tuple and "create_graph" in v:
                        sites.append((c.co_filename, cur, "create_graph", None))
            except Exception:
                pass
        fix = "reset the gradients every step (`zero_grad(set_to_none=True)`), or take them with " \
              "`torch.autograd.grad(..., create_graph=True)` instead of `.backward(create_graph=True)`" if sites else ""
    else:
        name = last if attr else path.split(".", 1)[0].split("[", 1)[0]
        if what.startswith(("closure", "default")) or (what.startswith("local of generator")):
            name = last
            attr = False
        sites = _sites(dis, codes, name, attr)
        grow = [s for s in sites if s[2] != "="]
        if grow:
            sites = grow
        fix = ""
        if sites and has_graph:
            how, src = sites[0][2], sites[0][3]
            if how == "+=":
                fix = "accumulate `%s.item()` (or `%s.detach()`)" % (src, src) if src else \
                    "accumulate a number (`.item()`) or a detached tensor (`.detach()`)"
            elif how == "=x" and kind == "tensor":
                fix = "update it from `%s.detach()` (or under `torch.no_grad()`)" % src if src else \
                    "update it under `torch.no_grad()` or store a `.detach()`ed value"
            elif how.startswith(".") or how == "[]=":
                fix = "keep `%s.item()` or `%s.detach()`" % (src, src) if src else \
                    "keep `.item()` or `.detach()`ed values"
    if not sites:
        return "", 0, "", 0
    f, ln = sites[0][0], sites[0][1]
    return f, ln, fix, (F_GUESS if len(set((s[0], s[1]) for s in sites)) > 1 else 0)


def census():
    """One census; reports growing holders to the tracer. Returns the holders sized {path: (items, nodes, bytes)}."""
    global n_census, last, last_short
    f = _native.get("plateau_retention")
    torch = sys.modules.get("torch")
    t0 = time.perf_counter()
    walk = _Walk(torch, t0 + MAX_SECONDS)
    try:
        walk.run()
    except Exception:
        walk.short = True
    n_census += 1
    seq = n_census
    short = walk.short
    sizes = {}
    grown = []
    for path, (items, nodes, b, what, kind, flags, ranges) in walk.holders.items():
        sizes[path] = (items, nodes, b)
        h = _hist.get(path)
        if h is None:
            if len(_hist) >= MAX_TRACKED:
                continue
            h = _hist[path] = []
        prev = h[-1] if h else None
        h.append((seq, items, nodes, b, flags))
        if len(h) > HISTORY:
            del h[0]
        if path in _reported:
            _meta[path] = (what, kind)
            continue
        if prev is not None and prev[0] == seq - 1 and \
                ((items != NA and prev[1] != NA and items > prev[1]) or (nodes > prev[2] and nodes != NA)):
            first = h[0]
            g = max((items - first[1]) / max(first[1], 1) if items != NA and first[1] != NA else 0,
                    (nodes - first[2]) / max(first[2], 1) if nodes != NA and first[2] != NA else 0)
            grown.append((g, path))
    for path in [p for p in _hist if p not in sizes and not short]:  # no longer reachable: forgotten
        del _hist[path]
        _meta.pop(path, None)
        _reported.pop(path, None)
    grown.sort(reverse=True)
    room = MAX_REPORTED - len(_reported)
    for g, path in grown[:max(room, 0)]:
        what, kind = _meta[path] = walk.holders[path][3:5]
        h = _hist[path]
        try:
            _reported[path] = _line(walk, path, what, kind, any(x[2] and x[2] != NA for x in h))
        except Exception:
            _reported[path] = ("", 0, "", 0)
        _reported[path] = _reported[path] + (True,)  # history still to send
    took = time.perf_counter() - t0
    if f is not None:
        ranges = {p: walk.holders[p][6] for p in _reported if p in walk.holders}
        _send(f, seq, short, len(walk.seen), len(walk.holders), took, ranges)
        ranges = None
    walk = None
    last, last_short = sizes, short
    return sizes


def _send(f, seq, short, n_objects, n_holders, took, ranges):
    import ctypes
    vals = (ctypes.c_uint64 * 4)(n_objects, n_holders, int(took * 1e9), NA)
    f(seq, F_SHORT if short else 0, vals, 4, b"", b"", b"census", b"", 0, b"")
    for path, rep in list(_reported.items()):
        file, line, fix, lflags, pending = rep
        what, kind = _meta[path]
        h = _hist[path] if pending else _hist[path][-1:]
        for (s, items, nodes, b, flags) in h:
            r = ranges.get(path, ()) if s == seq else ()  # storages: measured at this census only
            v = (ctypes.c_uint64 * (4 + 2 * len(r)))(items, nodes, b, len(r) if r else NA,
                                                     *[x for kv in r for x in kv])
            f(s, flags | lflags | (F_SHORT if short and s == seq else 0), v, len(v), _b(path, 255), _b(what, 255),
              _b(kind, 31), _b(file, 1023), int(line), _b(fix, 255))
        _reported[path] = (file, line, fix, lflags, False)


def _b(s, n):
    b = s.encode("utf-8", "replace")
    return b[:n]


def on_boundary():
    """At a step boundary (plateau/_torchstats.py): a census when the budget allows. Never raises."""
    global _next, _debt, census_seconds
    try:
        budget = _get_budget()
        if budget <= 0:
            return False
        t0 = time.perf_counter()
        if t0 < _next:
            return False
        census()
        t1 = time.perf_counter()
        took = max(t1 - t0, 0.0)
        census_seconds += took
        _next, _debt, _ = pace(_costs, _debt, took, t1, budget)
        return True
    except Exception:
        return False
