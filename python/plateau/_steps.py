"""Exact steps from the optimizer: every completed optimizer.step() of the pacing optimizer is a step boundary.

How a step is seen (docs/python.md, "Steps"):
- torch >= 2.0: torch.optim.optimizer.register_optimizer_step_post_hook, the global post-step hook.
- torch 1.13 (and 1.12) has no global hook, but every Optimizer subclass's `step` is wrapped on the class at the
  first construction (Optimizer._hook_for_profile, for the profiler) and that wrapper calls
  `self._optimizer_step_code()` after each step that returns normally. That method is an empty profiler entry
  point defined once on the base class: wrapping it there sees every optimizer's completed steps, including
  subclasses defined after us, without touching `step` itself.
Neither is installed, and this module is not imported, until the program imports torch.optim (the watch in
plateau/__init__.py).

Several optimizers (a GAN's D and G, or a model with two parameter groups in two optimizers): one step per
iteration. The first optimizer that steps paces the count; the others' steps are not boundaries. When another
optimizer steps twice while the pacing one does not step at all (training moved to a new optimizer), or the pacing
one is garbage-collected, the other becomes the pacer; the first of those two steps is not counted.
Gradient accumulation calls optimizer.step() once per accumulated batch: one boundary. A step that raises, or one
that GradScaler skips because of inf/NaN gradients (it then does not call optimizer.step()), is not a boundary.
Boundaries go to plateau_step_auto() (include/plateau/step.h): explicit plateau_step() calls win over them. After
each boundary sent to a loaded tracer, plateau/_torchstats.py hands over torch's CUDA counters and, within its time
budget, the live tensor count.
Nothing here raises into the program.
"""
import sys

from . import _native
# Imported here, with torch.optim (on the thread importing torch), never on the step path: a child forked while
# another thread is still importing a module finds that module's import lock held forever, and would hang at its
# first step (python.fork_step).
from . import _torchstats

_patched = False
_lock = None          # threading.Lock, created when torch.optim is patched; a fresh one in each forked child
_pacer = None         # weakref to the pacing optimizer (or a strong ref if it cannot be weakly referenced)
_others = {}          # id(optimizer) -> steps since the pacer last stepped
n_boundaries = 0      # boundaries sent to the tracer (or that would have been): for tests


def _emit():
    global n_boundaries
    n_boundaries += 1
    f = _native.get("plateau_step_auto")
    if f is not None:
        f()
        _torchstats.on_boundary()  # torch's counters and live tensors after the boundary (no-op without tracer)


def _ref(obj):
    try:
        import weakref
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


def on_step(opt):
    """Called after each completed optimizer step (any optimizer). Never raises."""
    global _pacer
    try:
        lock = _lock
        if lock is not None:
            lock.acquire()
        try:
            pacer = _pacer() if _pacer is not None else None
            if pacer is None:
                _pacer = _ref(opt)
                _others.clear()
                _emit()
            elif pacer is opt:
                _others.clear()
                _emit()
            else:
                n = _others.get(id(opt), 0) + 1
                if n >= 2:
                    _pacer = _ref(opt)
                    _others.clear()
                    _emit()
                else:
                    _others[id(opt)] = n
        finally:
            if lock is not None:
                lock.release()
    except Exception:
        pass


def _new_lock():
    """A fresh lock: at patch time, and in every child forked after it (os.register_at_fork). Another thread may
    hold the parent's lock at fork time, across the call into the tracer in _emit(); the child inherits it held, with
    no thread left to release it, and its first optimizer step would wait forever."""
    global _lock
    import threading
    _lock = threading.Lock()


try:
    import os
    os.register_at_fork(after_in_child=_new_lock)  # Python >= 3.7, like the bootstrap
except Exception:
    pass


def reset():
    """Forget the pacer (tests)."""
    global _pacer, n_boundaries
    _pacer = None
    _others.clear()
    n_boundaries = 0


def _post_hook(optimizer, args, kwargs):  # torch >= 2.0 signature
    on_step(optimizer)


def patch(optim):
    """Hook optimizer steps in the torch.optim module `optim`. Returns how ("global-hook", "step-code") or None."""
    global _patched
    if _patched:
        return None
    try:
        _new_lock()
        _native.get("plateau_step_auto")  # ctypes and dlopen(NULL) now, on the importing thread, not at a step
        mod = getattr(optim, "optimizer", None) or sys.modules.get("torch.optim.optimizer")
        register = getattr(mod, "register_optimizer_step_post_hook", None)
        if register is not None:
            register(_post_hook)
            _patched = True
            return "global-hook"
        base = getattr(mod, "Optimizer", None) or getattr(optim, "Optimizer", None)
        orig = getattr(base, "_optimizer_step_code", None) if base is not None else None
        if orig is None:
            return None

        def _optimizer_step_code(self):
            orig(self)
            on_step(self)

        _optimizer_step_code.__doc__ = getattr(orig, "__doc__", None)
        _optimizer_step_code.__wrapped__ = orig
        base._optimizer_step_code = _optimizer_step_code
        _patched = True
        return "step-code"
    except Exception:
        return None
