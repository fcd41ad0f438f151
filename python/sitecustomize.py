# plateau's bootstrap for Python programs (docs/python.md). `plateau run` puts this file's directory first on
# PYTHONPATH, so Python's `site` imports this module at start-up instead of the next `sitecustomize` on sys.path.
# It does two things, in this order:
#   1. imports the plateau package (plateau/__init__.py: it installs an import watch that hooks optimizer steps
#      once the program imports torch.optim, and imports nothing else), unless PLATEAU_PYTHON=0; any failure is
#      swallowed (one stderr line with PLATEAU_DEBUG=1);
#   2. runs the `sitecustomize` it shadows (the next one on sys.path), as `site` would have, and leaves it in
#      sys.modules under that name; its own errors reach `site` unchanged.
# PYTHONPATH reaches every child process, Python 2 and other versions included: this file must parse and run on
# any Python (no f-strings, no annotations) and touch nothing but its own names.


def _plateau_boot():
    import os
    import sys
    if sys.version_info < (3, 7):
        return
    if os.environ.get("PLATEAU_PYTHON", "1").strip().lower() in ("0", "no", "false", "off"):
        return
    try:
        import plateau  # installs the torch.optim watch (plateau/__init__.py), imports nothing else
    except Exception as e:  # never change what the program does
        if os.environ.get("PLATEAU_DEBUG", "0").strip().lower() not in ("", "0", "no", "false", "off"):
            try:
                sys.stderr.write("plateau: python bootstrap not loaded: %s: %s\n" % (type(e).__name__, e))
            except Exception:
                pass


def _plateau_chain():
    import os
    import sys
    try:  # sys.path without this directory (plateau run puts it there as a real path; abspath is cheap)
        here = os.path.dirname(os.path.abspath(__file__))
        rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    except Exception:
        return
    if sys.version_info >= (3, 4):
        # the interpreter's own frozen import machinery: importlib.util would cost ~5 ms of imports (contextlib,
        # functools, collections) and importlib.machinery another few hundred microseconds
        boot = sys.modules.get("_frozen_importlib")
        finder = sys.modules.get("_frozen_importlib_external")
        finder = getattr(finder, "PathFinder", None)
        module_from_spec = getattr(boot, "module_from_spec", None)
        if finder is None or module_from_spec is None:
            from importlib.machinery import PathFinder as finder
            from importlib.util import module_from_spec
        spec = finder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        mod = module_from_spec(spec)
        sys.modules["sitecustomize"] = mod
        spec.loader.exec_module(mod)
    else:  # Python 2 and early 3
        import imp
        try:
            found = imp.find_module("sitecustomize", rest)
        except ImportError:
            return
        try:
            del sys.modules["sitecustomize"]
            imp.load_module("sitecustomize", *found)
        finally:
            if found[0] is not None:
                found[0].close()


try:
    _plateau_boot()
except Exception:
    pass
try:
    _plateau_chain()
finally:
    del _plateau_boot, _plateau_chain
