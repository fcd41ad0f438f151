"""Exact steps from the optimizer: every completed optimizer.step() of the pacing optimizer is a step boundary.

How a step is seen (docs/python.md, "Steps"):
- torch >= 2.0: torch.optim.optimizer.register_optimizer_step_post_hook, the global post-step hook.
- torch 1.13 (and 1.12) has no global hook, but every Optimizer subclass's `step` is wrapped on the class at the
  first construction (Optimizer._hook_for_profile, for the profiler) and that wrapper calls
  `self._optimizer_step_code()` after each step that returns normally. That method is an empty profiler entry
  point defined once on the base class: wrapping it there sees every optimizer's completed steps, including
  subclasses defined after us, without touching `step` itself.
Neither is installed until the program imports torch.optim: a watch at the front of sys.meta_path answers for that
one name, wraps the real loader for that one module, and removes itself. A program that never imports torch pays
one string comparison per import.

Several optimizers (a GAN's D and G, or a model with two parameter groups in two optimizers): one step per
iteration. The first optimizer that steps paces the count; the others' steps are not boundaries. When another
optimizer steps twice while the pacing one does not step at all (training moved to a new optimizer), or the pacing
one is garbage-collected, the other becomes the pacer; the first of those two steps is not counted.
Gradient accumulation calls optimizer.step() once per accumulated batch: one boundary. A step that raises, or one
that GradScaler skips because of inf/NaN gradients (it then does not call optimizer.step()), is not a boundary.
Boundaries go to plateau_step_auto() (include/plateau/step.h): explicit plateau_step() calls win over them.
Nothing here raises into the program.
"""
import sys

from . import _native

_WATCHED = "torch.optim"
_installed = False
_patched = False
_lock = None          # threading.Lock, created when torch.optim is patched
_pacer = None         # weakref to the pacing optimizer (or a strong ref if it cannot be weakly referenced)
_others = {}          # id(optimizer) -> steps since the pacer last stepped
n_boundaries = 0      # boundaries sent to the tracer (or that would have been): for tests


def _emit():
    global n_boundaries
    n_boundaries += 1
    f = _native.get("plateau_step_auto")
    if f is not None:
        f()


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
    global _patched, _lock
    if _patched:
        return None
    try:
        import threading
        _lock = threading.Lock()
        mod = getattr(optim, "optimizer", None) or sys.modules.get(_WATCHED + ".optimizer")
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


class _Loader(object):
    """The real loader of torch.optim, plus a call to patch() after the module ran. It puts the real loader back on
    the module and its spec before running it, so nothing after the import can see this object."""

    def __init__(self, real):
        self._real = real

    def create_module(self, spec):
        create = getattr(self._real, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        try:
            module.__loader__ = self._real
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = self._real
        except Exception:
            pass
        self._real.exec_module(module)
        patch(module)

    def __getattr__(self, name):
        return getattr(self._real, name)


class _Watch(object):
    """A sys.meta_path entry that answers only for torch.optim, then removes itself."""

    def find_spec(self, name, path=None, target=None):
        if name != _WATCHED:
            return None
        try:
            self.remove()
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _Loader(spec.loader)
                    return spec
        except Exception:
            pass
        return None  # the import system goes on with the next finders, as without us

    def remove(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass

    def invalidate_caches(self):
        pass


def install():
    """Hook optimizer steps now if torch.optim is already imported, else when it is. Idempotent; never raises."""
    global _installed
    try:
        if _installed:
            return
        _installed = True
        optim = sys.modules.get(_WATCHED)
        if optim is not None:
            patch(optim)
        else:
            sys.meta_path.insert(0, _Watch())
    except Exception:
        pass
