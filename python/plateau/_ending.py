"""How the program ended (docs/end-of-run.md): an uncaught MemoryError or torch OutOfMemoryError, recorded for the
report's end-of-run view, without catching anything and without changing what the program does.

- torch's CUDA out-of-memory error: `torch.cuda.OutOfMemoryError.__init__` is wrapped (the original runs first,
  unchanged) so that torch's caching-allocator counters (allocated, reserved, inactive in split blocks) are handed
  to the tracer at the moment the error is made, when the memory it could not get is still in use. Only once per
  error object, and only when the program has CUDA up (plateau/_torchstats.py's own call path).
- the exit path: a callback registered with `atexit` reads what Python left of the exception that ended the program
  (`sys.last_exc` on 3.12+, `sys.last_value` before: set by the interpreter when it prints an uncaught exception,
  before it runs the `atexit` callbacks) and, for a MemoryError or torch's OutOfMemoryError, writes a mark labelled
  "plateau:uncaught TYPE" (include/plateau/step.h's plateau_mark); the report reads it as how the process ended,
  never as a user's mark.
Installed with the torch.optim watch (plateau/__init__.py), when torch is imported: `atexit` is already loaded by
then (torch's own imports load it), so this adds no module a program could see; a program without torch gets no
record, and the report says what run.status knows (its exit status). Nothing here raises into the program.
"""
import sys

from . import _native
from . import _torchstats

MARK = "plateau:uncaught "
_installed = False
_oom_cls = None
_seen = None  # id of the last OutOfMemoryError whose counters were sent


def _on_oom(err):
    global _seen
    try:
        if id(err) == _seen:
            return
        _seen = id(err)
        f = _native.get("plateau_alloc_stats")
        if f is not None:
            _torchstats.cuda_stats(f)
    except Exception:
        pass


def _wrap(cls):
    orig = cls.__init__

    def __init__(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        _on_oom(self)

    __init__.__doc__ = getattr(orig, "__doc__", None)
    __init__.__qualname__ = getattr(orig, "__qualname__", "__init__")
    cls.__init__ = __init__


def _at_exit():
    try:
        v = getattr(sys, "last_exc", None)
        if v is None:
            v = getattr(sys, "last_value", None)
        if v is None:
            return
        if _oom_cls is not None and isinstance(v, _oom_cls):
            name = "torch.cuda.OutOfMemoryError"
        elif isinstance(v, MemoryError):
            name = "MemoryError"
        else:
            return
        f = _native.get("plateau_mark")
        if f is not None:
            f((MARK + name).encode("ascii"))
    except Exception:
        pass


def install():
    """Once per process, after torch is imported. Never raises."""
    global _installed, _oom_cls
    if _installed:
        return
    _installed = True
    try:
        atexit = sys.modules.get("atexit")
        if atexit is None or _native.get("plateau_mark") is None:
            return  # no tracer, or a torch that loaded no atexit: nothing is registered
        atexit.register(_at_exit)
        torch = sys.modules.get("torch")
        cls = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            _wrap(cls)
            _oom_cls = cls
    except Exception:
        pass
