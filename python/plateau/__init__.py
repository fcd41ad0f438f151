"""plateau for Python programs: explicit steps and marks, and training-framework callbacks (docs/python.md).

Under `plateau run` nothing here is needed: the bootstrap (python/sitecustomize.py) already turns every optimizer
step into a step. Use these for explicit control:

    import plateau
    plateau.step()             # end of one training step (explicit steps replace the optimizer-derived ones)
    plateau.mark("eval-begin") # a named point in time
    trainer = transformers.Trainer(..., callbacks=[plateau.TrainerCallback()])
    trainer = lightning.Trainer(..., callbacks=[plateau.LightningCallback()])

Outside `plateau run` (no tracer in the process) each of these does nothing after one note on stderr. Importing
this package is cheap: ctypes, transformers and lightning are imported on first use only. Importing it also
installs the optimizer-step hook (plateau/_steps.py), so a program that imports plateau gets optimizer steps even
where the bootstrap did not run (python -I, -E, or PYTHONPATH reset by a launcher).
"""
from . import _native, _steps

__all__ = ["step", "mark", "TrainerCallback", "LightningCallback"]
__version__ = "0.1.0"


def step():
    """End of one training step. Call it after the optimizer update, once per step, from any thread."""
    f = _native.get("plateau_step")
    if f is None:
        _native.note_absent("plateau.step()")
        return
    f()


def mark(label=""):
    """A named point in time ("eval-begin", "epoch 3"); the tracer keeps its first 63 bytes (UTF-8)."""
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
    if name in ("TrainerCallback", "LightningCallback"):
        from . import _callbacks
        cls = getattr(_callbacks, "make_" + name)()
        globals()[name] = cls
        return cls
    raise AttributeError("module 'plateau' has no attribute %r" % (name,))


_steps.install()
