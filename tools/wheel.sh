#!/bin/bash
# wheel.sh BUILD [--lenient|--sdist]: the plateau-profiler wheel (docs/install.md), as `make wheel` makes it; with
# --sdist (make sdist) the source distribution instead, BUILD/wheel/sdist/plateau_profiler-<version>.tar.gz.
#   1. BUILD/wheel-venv: a venv over Debian's python3 holding the pinned build tools of tools/wheel-tools.txt
#      (meson-python, meson, build, wheel, auditwheel and what they need), made once (.stamp);
#   2. meson-python builds the wheel from this tree (pyproject.toml: -Dwheel=true, install tag 'wheel') in
#      BUILD/wheel/build, kept between runs so a second build only recompiles what changed;
#   3. the wheel holds no extension module, so it works on any Python 3: its tags become py3-none (meson-python
#      tags anything in site-packages with the building Python's ABI);
#   4. auditwheel repairs it: every ELF file's needed libraries are either in the wheel or on manylinux's list,
#      and the platform tag names the oldest glibc whose symbols it uses (manylinux_2_X);
#   5. the result goes to BUILD/wheel/dist (the one wheel there), and `auditwheel show` says what it found.
# --lenient (make test's wheel stage): a missing tool (no network) is not an error: the reason goes on one line to
# BUILD/wheel.failed and the script exits 0, so the wheel test skips with that reason instead of failing.
set -u
build=$(realpath -m "$1")
lenient=${2:-}
src=$(cd "$(dirname "$0")/.." && pwd)
venv=$build/wheel-venv
lock=$src/tools/wheel-tools.txt
py=${PL_WHEEL_BASE_PYTHON:-/usr/bin/python3}
out=$build/wheel
rm -f "$build/wheel.failed"
log=$(mktemp)
fail() {
  echo "wheel not made: $1" >&2
  sed 's/^/  /' "$log" | tail -15 >&2
  rm -f "$log"
  if [ "$lenient" = --lenient ] && [ "${2:-}" = tools ]; then echo "$1" > "$build/wheel.failed"; exit 0; fi
  exit 1
}
pip_() { "$venv/bin/python" -m pip --disable-pip-version-check --no-input "$@"; }
if ! { [ -f "$venv/.stamp" ] && [ "$venv/.stamp" -nt "$lock" ]; }; then
  rm -rf "$venv"
  "$py" -m venv "$venv" >>"$log" 2>&1 || fail "$py -m venv failed (python3-venv?)" tools
  pip_ install --retries 1 --timeout 20 --only-binary :all: -r "$lock" >>"$log" 2>&1 || {
    rm -rf "$venv"
    fail "pip install -r tools/wheel-tools.txt failed (no network?)" tools
  }
  touch "$venv/.stamp"
fi
export PATH=$venv/bin:$PATH
if [ "$lenient" = --sdist ]; then
  # meson dist: the committed tree (HEAD), not uncommitted changes
  rm -rf "$out/sdist"
  "$venv/bin/python" -m build --sdist --no-isolation --outdir "$out/sdist" "$src" >>"$log" 2>&1 ||
    fail "meson-python could not make the sdist"
  rm -f "$log"
  echo "sdist: $(ls "$out"/sdist/*.tar.gz) ($(du -k "$out"/sdist/*.tar.gz | cut -f1) KiB)"
  exit 0
fi
rm -rf "$out/raw" "$out/tagged" "$out/dist"
mkdir -p "$out/raw" "$out/tagged" "$out/dist"
# --no-isolation: the pinned tools of the venv, no download per build; build-dir: incremental rebuilds
"$venv/bin/python" -m build --wheel --no-isolation --outdir "$out/raw" -Cbuild-dir="$out/build" "$src" \
  >>"$log" 2>&1 || fail "meson-python could not build the wheel (log: $out/build/meson-logs/meson-log.txt)"
raw=$(ls "$out"/raw/*.whl)
"$venv/bin/python" -m wheel tags --python-tag py3 --abi-tag none "$raw" >>"$log" 2>&1 || fail "wheel tags"
mv "$out"/raw/*-py3-none-*.whl "$out/tagged/"
"$venv/bin/auditwheel" repair -w "$out/dist" "$out"/tagged/*.whl >>"$log" 2>&1 || fail "auditwheel repair"
whl=$(ls "$out"/dist/*.whl)
"$venv/bin/auditwheel" show "$whl" 2>&1 | tr -s '\n' | sed 's/^/  /'
rm -f "$log"
echo "wheel: $whl ($(du -k "$whl" | cut -f1) KiB)"
