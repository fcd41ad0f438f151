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
        try:
            f = lib.plateau_env
            f.argtypes = [ctypes.c_char_p]
            f.restype = ctypes.c_char_p
            funcs["plateau_env"] = f
        except AttributeError:
            pass
    except Exception:
        funcs = {}
    _funcs = funcs
    return funcs


def get(name):
    """The export `name`, or None when the tracer is not loaded."""
    funcs = _funcs if _funcs is not None else _load()
    return funcs.get(name)


def env(name):
    """The value of plateau's variable `name` (PLATEAU_DIR, PLATEAU_TENSOR_BUDGET, ...), or None. The tracer keeps
    the variables it was given out of the program's environment (docs/env.md, "The program's environment"), so the
    program's own os.environ is read first, then the tracer's copy."""
    v = None
    try:
        import os
        v = os.environ.get(name)
        if v is None:
            f = get("plateau_env")
            if f is not None:
                raw = f(name.encode("ascii"))
                if raw is not None:
                    v = raw.decode("utf-8", "surrogateescape")
    except Exception:
        pass
    return v


_said = set()  # texts this process put on plateau's channel


def note(text):
    """One note on plateau's own channel, as the preload writes its own (docs/env.md, "Notes"): a line
    "PID<TAB>TEXT" appended to the run directory's plateau-notes file, which `plateau run` prints once at the end;
    never the program's stderr. Once per text per process; dropped where there is no run directory (PLATEAU_DIR) or
    it cannot be written."""
    try:
        if text in _said:
            return
        _said.add(text)
        import os
        d = env("PLATEAU_DIR")
        if not d:
            return
        fd = os.open(os.path.join(d, "plateau-notes"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC |
                     os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        try:
            os.write(fd, ("%d\t%s\n" % (os.getpid(), text.replace("\n", " "))).encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:
        pass


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
