"""The census's rules, checked in-process (run by tests/python/test_retention.py --rules with /usr/bin/python3 and
torch; argv[1] is the directory holding the plateau package). The tracer is replaced by a recorder of what
plateau_retention would receive. Prints one `ok:` line per rule; any failure raises."""
import contextlib
import gc
import io
import sys
import weakref

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402

from plateau import _census, _native  # noqa: E402

calls = []


def recorder(census, flags, vals, n, path, what, kind, file, line, fix):
    calls.append((census, flags, [vals[i] for i in range(n)], path.decode(), what.decode(), kind.decode(),
                  file.decode(), line, fix.decode()))


_native._funcs = {"plateau_retention": recorder}


class Big:
    pass


class Loud:
    """Every attribute read prints and raises: the census must never run it."""

    def __getattribute__(self, name):
        print("Loud." + name + " was read")
        raise RuntimeError(name)

    def __len__(self):
        raise RuntimeError("len")


loud = Loud()
loud_list = [Loud()]
kept = []


def rule_bounded_memory():
    """What is remembered between censuses is bounded: at most MAX_TRACKED holders, HISTORY sizes each."""
    global many
    many = [[k] for k in range(50)]
    old = _census.MAX_TRACKED
    _census.MAX_TRACKED = 10
    _census._hist.clear()
    try:
        for _ in range(3):
            _census.census()
        assert len(_census._hist) <= 10, len(_census._hist)
        assert all(len(h) <= _census.HISTORY for h in _census._hist.values())
    finally:
        _census.MAX_TRACKED = old
        many = None
    print("ok: at most MAX_TRACKED holders and HISTORY sizes each remembered between censuses")


def rule_locals_snapshot():
    """A local the function deletes after a census is freed then (Python < 3.13: the frame's f_locals snapshot,
    filled by the census, is emptied again)."""
    x = Big()
    r = weakref.ref(x)
    _census.census()
    del x
    assert r() is None, "the census kept a deleted local alive (f_locals snapshot)"
    print("ok: a local deleted after a census is freed at once")


def rule_no_references():
    t = torch.ones(1000, requires_grad=True)
    lst = [t * 2 for _ in range(3)]
    r = weakref.ref(lst[0])
    global kept
    kept = lst
    _census.census()
    kept = None
    lst = None
    assert r() is None, "the census kept a reference to a tensor between censuses"
    for path, h in _census._hist.items():
        assert type(path) is str and all(type(v) is int for p in h for v in p), (path, h)
    print("ok: nothing but ints and strings kept between censuses")


def rule_quiet_and_unchanged():
    mods = set(sys.modules)
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        sizes = _census.census()
        _census.on_boundary()
    assert out.getvalue() == "" and err.getvalue() == "", (out.getvalue(), err.getvalue())
    assert set(sys.modules) == mods, sorted(set(sys.modules) ^ mods)
    assert gc.isenabled() == enabled and gc.get_threshold() == thresholds
    assert "loud_list" in sizes and "loud" not in sizes
    print("ok: nothing printed, no module imported, gc untouched, objects with hostile attributes not run")


def rule_growth_reported():
    global grows
    grows = []
    calls.clear()
    for k in range(4):
        grows.append(torch.ones(10, requires_grad=True) * 2)
        _census.census()
    holders = [c for c in calls if c[3] == "grows"]
    assert holders, "a growing global list was not reported"
    assert [c[2][0] for c in holders] == [1, 2, 3, 4], holders  # its history first, then each census
    assert holders[0][4] == "global in census_rules.py" and holders[0][5] == "list", holders[0]
    assert holders[0][7] > 0 and holders[0][8] == "keep `.item()` or `.detach()`ed values", holders[0]
    censuses = [c for c in calls if c[3] == "" and c[5] == "census"]
    assert len(censuses) == 4 and all(c[1] & _census.F_SHORT == 0 for c in censuses), censuses
    print("ok: a list growing by one tensor per census reported with its history, its line and a fix")


def rule_stops_short():
    global wide
    wide = [{"k%d" % j: {"v": j} for j in range(40)} for _ in range(60)]
    calls.clear()
    old = _census.MAX_OBJECTS
    _census.MAX_OBJECTS = 500
    try:
        _census.census()
    finally:
        _census.MAX_OBJECTS = old
    c = [c for c in calls if c[5] == "census"][-1]
    assert c[1] & _census.F_SHORT and c[2][0] <= 501, c
    print("ok: a census over its object cap stops short and says so (%d objects)" % c[2][0])


rule_locals_snapshot()
rule_no_references()
rule_quiet_and_unchanged()
rule_growth_reported()
rule_stops_short()
rule_bounded_memory()
