#!/bin/bash
# The wheel as users install it (docs/install.md): `pip install` of build/wheel/dist/*.whl (made by `make wheel`,
# tools/wheel.sh) into a fresh venv of Debian's python3, without its site packages and without network, in a
# working directory outside the tree, with no build tree on any path (PATH, PYTHONPATH, LD_LIBRARY_PATH, PLATEAU_*
# unset). Then that venv's `plateau`:
# - finds its preload, the bundled libjemalloc.so.2 and the bootstrap inside the installed package (what the traced
#   command maps, and the PYTHONPATH the tracer hands to Python, are under the venv's
#   site-packages/plateau_profiler), as
#   plateau_profiler.torch finds its libplateau_alloc.so there, outside plateau run too;
# - leaves the traced command's ignored signals as they are untraced (the console script is Python, which ignores
#   SIGPIPE and SIGXFSZ: it puts them back before it execs the executable);
# - runs an unmodified leaking torch 1.13 script (tests/targets/py_torch_append.py, copied out of the tree) on a
#   second venv, over Debian's python3 with its site packages for torch only: the report counts its 200 optimizer
#   steps (the bootstrap came from the wheel), calls it a leak and names the script's `# LEAK` line;
# - under it, `import plateau` gives plateau's package only where the program has no `plateau` of its own (a
#   stand-in for PyPI's other `plateau` wins), `import plateau_profiler` always;
# - installs the same way into venvs of pyenv's CPython 3.7 and newer, where present, whose plateau bootstraps them;
# - makes pytest load plateau's plugin by itself (the pytest11 entry point): `pytest --plateau` fails a leaking test
#   body and passes a plateauing one (pytest from BUILD_ROOT/integrations-venv; not tried, and said, without it);
# - with the package's libplateau_preload.so moved away, says it cannot find it and exits 2 (the lookup is the
#   package's, nothing outside it).
# The wheel's platform tag names a manylinux glibc floor, not the build machine's `linux`.
# Exit 77 (skip) when there is no wheel: BUILD/wheel.failed says why (no network for its tools), else `make wheel`
# was not run; also when Debian's python3 has no torch.
# usage: test_wheel.sh BUILD_ROOT SOURCE_ROOT
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")
if [ -f "$build/wheel.failed" ]; then echo "SKIP: $(cat "$build/wheel.failed")"; exit 77; fi
shopt -s nullglob
wheels=("$build"/wheel/dist/plateau_profiler-*.whl)
[ ${#wheels[@]} -eq 1 ] || { echo "SKIP: no wheel in $build/wheel/dist (make wheel makes it)"; exit 77; }
whl=${wheels[0]}
py=/usr/bin/python3
$py -c 'import torch' >/dev/null 2>&1 ||
  { echo "SKIP: $py cannot import torch (python3-torch: make test installs it)"; exit 77; }
work=$(mktemp -d /tmp/pl-test-wheel-XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.txt; do echo "== $f"; head -c 4000 "$f"; done >&2; exit 1; }
echo "wheel: $(basename "$whl") ($(date -r "$whl" '+%F %T'))"
case $(basename "$whl") in
  *-py3-none-manylinux_2_[0-9]*_x86_64.whl) ;;
  *) fail "the wheel's tags are not py3-none-manylinux_2_N: $(basename "$whl")" ;;
esac

pyenv_versions=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")/versions
# a clean environment: nothing of the tree or of a plateau outside the venv
unset PYTHONPATH LD_PRELOAD LD_LIBRARY_PATH PYTHONHOME VIRTUAL_ENV
for v in $(env | sed -n 's/^\(PLATEAU_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export PATH=/usr/bin:/bin
cd "$work"

$py -m venv "$work/venv" >"$work/venv.txt" 2>&1 || fail "python3 -m venv"
"$work/venv/bin/pip" --disable-pip-version-check install --no-index --no-deps "$whl" >"$work/pip.txt" 2>&1 ||
  fail "pip install of the wheel"
site=$("$work/venv/bin/python" -c 'import plateau_profiler, os; print(os.path.dirname(plateau_profiler.__file__))')
case $site in "$work/venv/"*) ;; *) fail "plateau_profiler imported from $site, not the venv" ;; esac
"$work/venv/bin/python" -c 'import plateau' >/dev/null 2>&1 && fail "the wheel installs a top-level 'plateau'"
alloc=$("$work/venv/bin/python" -c 'import plateau_profiler.torch as t; print(t.library_path())')
[ "$alloc" = "$site/lib/libplateau_alloc.so" ] || fail "plateau_profiler.torch finds $alloc, not the package's"
P=$work/venv/bin/plateau
[ -x "$P" ] || fail "no $P"
"$P" --version >"$work/version.txt" 2>&1 || fail "plateau --version"

# what the traced command runs with: the preload and jemalloc mapped from the package, and the bootstrap's directory
# on the PYTHONPATH the tracer hands to Python (the command's own environment does not show plateau's variables:
# docs/env.md), both from the package
"$P" run -o "$work/env-run" --no-report --host-allocator jemalloc -- sh -c 'cat /proc/$$/maps' \
  >"$work/env.txt" 2>&1 || fail "plateau run sh"
grep -q " $site/lib/libplateau_preload.so\$" "$work/env.txt" &&
  grep -q " $site/lib/libjemalloc.so.2\$" "$work/env.txt" ||
  fail "the preload and jemalloc are not the package's ($site/lib)"
"$P" run -o "$work/pp-run" --no-report -- "$work/venv/bin/python" -c 'import ctypes
f = ctypes.CDLL(None).plateau_env
f.restype = ctypes.c_char_p
print("PYTHONPATH=" + f(b"PYTHONPATH").decode())' >"$work/pp.txt" 2>&1 || fail "plateau run python"
grep -qx "PYTHONPATH=$site/boot" "$work/pp.txt" || fail "the bootstrap is not the package's ($site/boot)"

# the signals the traced command ignores are those it ignores untraced: the console script is Python, which ignores
# SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across its exec of bin/plateau
want=$(grep '^SigIgn' /proc/self/status)
got=$("$P" run -o "$work/sig-run" --no-report -- grep '^SigIgn' /proc/self/status 2>"$work/sig.txt") ||
  fail "plateau run grep"
[ "$got" = "$want" ] || fail "the traced command ignores other signals: $got, untraced $want"

# the program's own venv: Debian's python3 with its site packages (torch 1.13), nothing of plateau
$py -m venv --system-site-packages "$work/prog" >>"$work/venv.txt" 2>&1 || fail "python3 -m venv (program)"
cp "$src/tests/targets/py_torch_append.py" "$work/leak.py"
line=$(grep -n '# LEAK' "$work/leak.py" | cut -d: -f1)
"$P" run -o "$work/leak-run" --no-report -- "$work/prog/bin/python" leak.py >"$work/leak.txt" 2>&1 ||
  fail "plateau run of the torch script"
grep -qx "done 200" "$work/leak.txt" || fail "the torch script did not finish"
"$P" report "$work/leak-run" --json "$work/leak.json" >"$work/report.txt" 2>&1 || [ $? -eq 1 ] || fail "plateau report"
"$work/venv/bin/python" - "$work/leak.json" "$work/report.txt" "$line" <<'PY' || fail "the report of the torch script"
import json, sys
rep = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
line = int(sys.argv[3])
procs = [p for p in rep["run"]["processes"] if "leak.py" in p["argv"]]
assert procs, [p["argv"] for p in rep["run"]["processes"]]
proc = max(procs, key=lambda p: p["records"])
row = next(p for p in rep["processes"] if p["pid"] == proc["pid"])
verdicts = {m["name"]: m["verdict"] for m in row["metrics"]}
head = text.splitlines()[0]
print("steps:", proc["steps"], "| heap verdicts:", verdicts.get("heap.bytes"), verdicts.get("heap.count"))
print(head)
assert proc["steps"] == 200, f"{proc['steps']} steps, want the script's 200 optimizer steps (the bootstrap)"
assert "leak" in (verdicts.get("heap.bytes"), verdicts.get("heap.count")), verdicts
assert head.startswith("verdict: LEAK") and f"allocated at leak.py:{line}" in head, f"want leak.py:{line}: {head}"
PY

# names: under plateau run `import plateau` is plateau's package only where the program has no `plateau` of its own
# (PyPI's other project, here a stand-in in the program's venv); `import plateau_profiler` is always ours
"$P" run -o "$work/names-run" --no-report -- "$work/venv/bin/python" -c \
  'import plateau, plateau_profiler; print(plateau.__file__); print(plateau_profiler.__file__)' \
  >"$work/names.txt" 2>&1 || fail "import plateau, plateau_profiler under plateau run"
[ "$(grep -cx "$site/__init__.py" "$work/names.txt")" -eq 2 ] || fail "plateau and plateau_profiler are not the package"
other=$("$work/prog/bin/python" -c 'import site; print(site.getsitepackages()[0])')/plateau
mkdir "$other" && echo 'NAME = "other"' >"$other/__init__.py"
"$P" run -o "$work/other-run" --no-report -- "$work/prog/bin/python" -c 'import plateau; print(plateau.NAME)' \
  >"$work/other.txt" 2>&1 || fail "import plateau beside another plateau under plateau run"
grep -qx other "$work/other.txt" || fail "the program's own plateau lost to plateau's package"

# other Pythons (pyenv's 3.7+, where present): the same wheel installs into a venv of each, and under its plateau
# run `import plateau` in that venv's Python is the package installed there (the bootstrap, on that version)
pythons=""
for v in "$pyenv_versions"/3.*/bin/python3; do
  [ -x "$v" ] || continue
  ver=$("$v" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
  case $ver in 3.[0-6]) continue ;; esac
  "$v" -m venv "$work/v$ver" >>"$work/venv.txt" 2>&1 || fail "venv of $v"
  "$work/v$ver/bin/pip" --disable-pip-version-check install --no-index --no-deps "$whl" >>"$work/pip.txt" 2>&1 ||
    fail "pip install of the wheel on Python $ver"
  vsite=$("$work/v$ver/bin/python" -c 'import plateau_profiler, os; print(os.path.dirname(plateau_profiler.__file__))')
  "$work/v$ver/bin/plateau" run -o "$work/run-$ver" --no-report -- "$work/v$ver/bin/python" -c \
    'import plateau; print(plateau.__file__)' >"$work/py$ver.txt" 2>&1 || fail "plateau run on Python $ver"
  grep -qx "$vsite/__init__.py" "$work/py$ver.txt" || fail "import plateau on Python $ver is not the package"
  pythons="$pythons $ver"
  rm -rf "$work/v$ver"
done

# pytest finds the package's plugin by itself (the wheel's pytest11 entry point): in a venv with the wheel and pytest
# (the integrations venv's, on a .pth: no network here), the venv's bin on PATH as an activated venv has it,
# `pytest --plateau` traces each test: the leaking body fails, the plateauing one passes
pytest_site=$(echo "$build"/integrations-venv/lib/python3*/site-packages)
if [ -d "$pytest_site/pytest" ]; then
  $py -m venv "$work/pt" >>"$work/venv.txt" 2>&1 || fail "python3 -m venv (pytest)"
  "$work/pt/bin/pip" --disable-pip-version-check install --no-index --no-deps "$whl" >>"$work/pip.txt" 2>&1 ||
    fail "pip install of the wheel (pytest venv)"
  echo "$pytest_site" >"$("$work/pt/bin/python" -c 'import site; print(site.getsitepackages()[0])')/pytest-site.pth"
  mkdir "$work/pt-tests"
  cp "$src/tests/python/pytest_bodies/bodies.py" "$work/pt-tests/"
  printf 'import bodies\n\n\ndef test_%s():\n    bodies.%s()\n\n\n' leak_py leak_py plateau_py plateau_py \
    >"$work/pt-tests/test_wheel_bodies.py"
  rc=0
  (cd "$work/pt-tests" && PATH=$work/pt/bin:$PATH "$work/pt/bin/python" -m pytest --plateau -p no:cacheprovider -q \
    -rA test_wheel_bodies.py) >"$work/pytest.txt" 2>&1 || rc=$?
  [ $rc -eq 1 ] && grep -q '^FAILED test_wheel_bodies.py::test_leak_py - Failed: plateau: verdict: LEAK' \
    "$work/pytest.txt" && grep -q '^PASSED test_wheel_bodies.py::test_plateau_py' "$work/pytest.txt" ||
    fail "pytest --plateau with the wheel's plugin exited $rc (want 1: the leak failed, the plateau passed)"
  pytest_ok="pytest --plateau: the leak failed, the plateau passed"
else
  pytest_ok="pytest --plateau not tried: no pytest in $build/integrations-venv (make integrations-venv)"
fi

# the lookup is the package's: without its preload library, plateau run says so and traces nothing
mv "$site/lib/libplateau_preload.so" "$site/preload.away"
rc=0
"$P" run -o "$work/nolib-run" --no-report -- true >"$work/nolib.txt" 2>&1 || rc=$?
mv "$site/preload.away" "$site/lib/libplateau_preload.so"
[ $rc -eq 2 ] && grep -q "cannot find libplateau_preload.so" "$work/nolib.txt" ||
  fail "without the package's lib/libplateau_preload.so, plateau run exited $rc"
echo "ok: $(basename "$whl") in a fresh venv: preload, jemalloc and bootstrap from $site; leak.py:$line named"
echo "ok: also installed and bootstrapped on Python${pythons:- (no pyenv Python found)}"
echo "ok: $pytest_ok"
