"""plateau for Python programs: exact steps from the optimizer, explicit steps and marks, framework callbacks
(docs/python.md).

Under `plateau run` nothing needs importing: the bootstrap (python/boot/sitecustomize.py) loads this package at
start-up under the private name `_plateau_bootstrap`, and every optimizer step becomes a step. For explicit
control:

    import plateau
    plateau.step()             # end of one training step (explicit steps replace the optimizer-derived ones)
    plateau.mark("eval-begin") # a named point in time
    trainer = transformers.Trainer(..., callbacks=[plateau.TrainerCallback()])
    trainer = lightning.Trainer(..., callbacks=[plateau.LightningCallback()])
    plateau.torch.use_allocator()  # torch >= 2.0 with a GPU: PyTorch allocates through plateau's allocator

Outside `plateau run` (no tracer in the process) step(), mark() and plateau.torch.use_allocator() do nothing after
one note on stderr.
This file is what the bootstrap costs a program that never imports torch, so it imports nothing at start-up: it
puts one entry at the front of sys.meta_path that answers only for the name "torch.optim" (one string comparison
per import, bench/RESULTS.md "Python bootstrap"). When the program imports torch.optim, that entry wraps the real
loader for that one module, removes itself, and after the module ran installs the step hook (plateau/_steps.py).
ctypes, transformers and lightning are imported on first use only. Nothing here raises into the program.
"""
import sys

__all__ = ["step", "mark", "TrainerCallback", "LightningCallback"]
__version__ = "0.1.0"


def step():
    """End of one training step. Call it after the optimizer update, once per step, from any thread."""
    from . import _native
    f = _native.get("plateau_step")
    if f is None:
        _native.note_absent("plateau.step()")
        return
    f()


def mark(label=""):
    """A named point in time ("eval-begin", "epoch 3"); the tracer keeps its first 63 bytes (UTF-8)."""
    from . import _native
    f = _native.get("plateau_mark")
    if f is None:
        _native.note_absent("plateau.mark()")
        return
    try:
        data = str(label).encode("utf-8", "replace")
    except Exception:
        data = b""
    f(data.replace(b"\0", b" "))


def __getattr__(name):  # PEP 562: the callback classes are built on first use (they import their framework)
    if name == "torch":  # plateau.torch: the allocator switch (imports nothing until called)
        import importlib
        return importlib.import_module(__name__ + ".torch")
    if name in ("TrainerCallback", "LightningCallback"):
        from . import _callbacks
        cls = getattr(_callbacks, "make_" + name)()
        globals()[name] = cls
        return cls
    raise AttributeError("module 'plateau' has no attribute %r" % (name,))


# ------------------------------------------------------------------------------------------ the torch.optim watch

_WATCHED = "torch.optim"


def _on_optim(module):
    try:
        from . import _steps
        _steps.patch(module)
    except Exception:
        pass
    try:
        from . import _ending  # how the program ends: an uncaught MemoryError or CUDA OOM (docs/end-of-run.md)
        _ending.install()
    except Exception:
        pass


class _Loader(object):
    """The real loader of torch.optim, plus the step hook after the module ran. It puts the real loader back on the
    module and its spec before running it, so nothing after the import can see this object."""

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
        _on_optim(module)

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


# ------------------------------------------------------------------------------- the bootstrap's public name

_PRIVATE = "_plateau_bootstrap"  # the name the bootstrap loads this package under (python/boot/sitecustomize.py)


class _Public(object):
    """At the very end of sys.meta_path (the bootstrap puts it there): answers `import plateau` with this package's
    directory, so only when no finder before it, and nothing on sys.path (the script's directory, PYTHONPATH,
    site-packages), has a `plateau` of its own. The program's own module always wins."""

    def __init__(self, path):
        self._path = path

    def find_spec(self, name, path=None, target=None):
        if name != "plateau":
            return None
        try:
            import os
            return sys.modules["_frozen_importlib_external"].spec_from_file_location(
                name, os.path.join(self._path, "__init__.py"), submodule_search_locations=[self._path])
        except Exception:
            return None

    def invalidate_caches(self):
        pass


def _serve_public(path):
    """The bootstrap's copy: make `import plateau` (docs/python.md's API) work where the program has none."""
    if not any(type(f).__name__ == "_Public" for f in sys.meta_path):
        sys.meta_path.append(_Public(path))


def _install():
    """Hook optimizer steps now if torch.optim is already imported, else when it is. Once per process: the public
    `plateau`, imported under the bootstrap, leaves that to the bootstrap's copy."""
    if __name__ != _PRIVATE and _PRIVATE in sys.modules:
        return
    try:
        optim = sys.modules.get(_WATCHED)
        if optim is not None:
            _on_optim(optim)
        elif not any(type(f) is _Watch for f in sys.meta_path):
            sys.meta_path.insert(0, _Watch())
    except Exception:
        pass


_install()
