"""The preloaded tracer's exports (include/plateau/step.h), found through ctypes on first use.

ctypes.CDLL(None) is the process's global scope, where LD_PRELOAD put libplateau_preload.so. When the tracer is
not loaded (the program runs outside `plateau run`), every function here is a no-op. Nothing here raises.
"""
import sys

_funcs = None  # name -> ctypes function, or {} when the tracer is not loaded
_noted = False


def _load():
    global _funcs
    funcs = {}
    try:
        import ctypes
        lib = ctypes.CDLL(None)
        u64p = ctypes.POINTER(ctypes.c_uint64)
        for name, argtypes in (("plateau_step", []), ("plateau_step_auto", []), ("plateau_mark", [ctypes.c_char_p]),
                               ("plateau_alloc_stats", [ctypes.c_int, ctypes.c_int, u64p, ctypes.c_int]),
                               ("plateau_retention", [ctypes.c_uint, ctypes.c_uint, u64p, ctypes.c_int] +
                                [ctypes.c_char_p] * 4 + [ctypes.c_int, ctypes.c_char_p])):
            try:
                f = getattr(lib, name)
            except AttributeError:
                continue
            f.argtypes = argtypes
            f.restype = None
            funcs[name] = f
    except Exception:
        funcs = {}
    _funcs = funcs
    return funcs


def get(name):
    """The export `name`, or None when the tracer is not loaded."""
    funcs = _funcs if _funcs is not None else _load()
    return funcs.get(name)


def note_absent(what):
    """One stderr line per process the first time an explicit call finds no tracer; silent after."""
    global _noted
    if _noted:
        return
    _noted = True
    try:
        sys.stderr.write("plateau: %s does nothing: the plateau tracer is not loaded in this process "
                         "(run the program under `plateau run`); further calls are silent\n" % what)
    except Exception:
        pass
