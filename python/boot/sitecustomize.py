# plateau's bootstrap for Python programs (docs/python.md). `plateau run` puts this file's directory (and nothing
# else of plateau's) first on PYTHONPATH, so Python's `site` imports this module at start-up instead of the next
# `sitecustomize` on sys.path. It does three things, in this order, and registers no name a program could use:
#   1. loads plateau's package (../plateau; in a wheel, .., the package plateau_profiler itself) under the private
#      name `_plateau_bootstrap`, never as `plateau`: it installs an import watch that hooks optimizer steps once
#      the program imports torch.optim, and imports nothing else; then puts a finder at the very end of
#      sys.meta_path that answers `import plateau` with that package only when nothing on sys.path (the script's
#      directory, PYTHONPATH, site-packages) has a `plateau` of its own. Skipped with PLATEAU_PYTHON=0 or before
#      Python 3.7; any failure is swallowed (one stderr line with PLATEAU_DEBUG=1);
#   2. runs the `sitecustomize` it shadows (the next one on sys.path), as `site` would have, and leaves it in
#      sys.modules under that name; its own errors reach `site` unchanged;
#   3. when there is none, fails its own import with the ImportError Python gives for a missing module: `site`
#      ignores it as it does untraced, nothing named `sitecustomize` stays in sys.modules, and a later
#      `import sitecustomize` (one in the script's directory, found first once sys.path[0] is set) gives exactly
#      what it gives untraced.
# Last, it takes its own directory out of sys.path. PYTHONPATH (which the tracer hands every child process, while
# the program's own environment keeps its own value: docs/env.md) reaches Python 2 and other versions too: this file
# must parse and run on any Python (no f-strings, no annotations) and touch nothing but its own names.

_PLATEAU_PRIVATE = "_plateau_bootstrap"


def _plateau_boot():
    import os
    import sys
    if sys.version_info < (3, 7) or _PLATEAU_PRIVATE in sys.modules:
        return
    if os.environ.get("PLATEAU_PYTHON", "1").strip().lower() in ("0", "no", "false", "off"):
        return
    try:
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if os.path.isfile(os.path.join(pkg, "plateau", "__init__.py")):
            pkg = os.path.join(pkg, "plateau")  # build tree, install; a wheel: boot/ is inside the package itself
        # the interpreter's own frozen import machinery: importlib.util would cost ~5 ms of imports
        boot = sys.modules["_frozen_importlib"]
        spec = sys.modules["_frozen_importlib_external"].spec_from_file_location(
            _PLATEAU_PRIVATE, os.path.join(pkg, "__init__.py"), submodule_search_locations=[pkg])
        mod = boot.module_from_spec(spec)
        sys.modules[_PLATEAU_PRIVATE] = mod
        try:
            spec.loader.exec_module(mod)  # installs the torch.optim watch (plateau/__init__.py)
        except BaseException:
            del sys.modules[_PLATEAU_PRIVATE]
            raise
        mod._serve_public(pkg)
    except Exception as e:  # never change what the program does
        if os.environ.get("PLATEAU_DEBUG", "0").strip().lower() not in ("", "0", "no", "false", "off"):
            try:
                sys.stderr.write("plateau: python bootstrap not loaded: %s: %s\n" % (type(e).__name__, e))
            except Exception:
                pass


def _plateau_chain():
    """Run the sitecustomize this one shadows; False when there is none."""
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if sys.version_info >= (3, 4):
        boot = sys.modules.get("_frozen_importlib")
        finder = sys.modules.get("_frozen_importlib_external")
        finder = getattr(finder, "PathFinder", None)
        module_from_spec = getattr(boot, "module_from_spec", None)
        if finder is None or module_from_spec is None:
            from importlib.machinery import PathFinder as finder
            from importlib.util import module_from_spec
        spec = finder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return False
        mod = module_from_spec(spec)
        sys.modules["sitecustomize"] = mod
        spec.loader.exec_module(mod)
        return True
    had_imp = "imp" in sys.modules  # Python 2 and early 3; a builtin module, left unregistered as we found it
    import imp
    try:
        try:
            found = imp.find_module("sitecustomize", rest)
        except ImportError:
            return False
        try:
            del sys.modules["sitecustomize"]
            imp.load_module("sitecustomize", *found)
        finally:
            if found[0] is not None:
                found[0].close()
        return True
    finally:
        if not had_imp:
            sys.modules.pop("imp", None)


def _plateau_unpath():
    """Take this file's directory out of sys.path and the import system's cache: PYTHONPATH named it only so that
    `site` finds this file, and the program's sys.path is what it would be untraced (docs/env.md)."""
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != here]
    cache = getattr(sys, "path_importer_cache", {})
    for key in [k for k in cache if isinstance(k, str) and k and os.path.abspath(k) == here]:
        del cache[key]


def _plateau_missing():
    """The error `import sitecustomize` raises where no sitecustomize exists."""
    import sys
    if sys.version_info >= (3, 6):
        return ModuleNotFoundError("No module named 'sitecustomize'", name="sitecustomize")  # noqa: F821
    if sys.version_info >= (3, 3):
        return ImportError("No module named 'sitecustomize'", name="sitecustomize")
    return ImportError("No module named sitecustomize")


try:
    _plateau_boot()
except Exception:
    pass
try:
    if not _plateau_chain():
        raise _plateau_missing()
finally:
    try:
        _plateau_unpath()
    except Exception:
        pass
    del _plateau_boot, _plateau_chain, _plateau_unpath, _plateau_missing, _PLATEAU_PRIVATE
