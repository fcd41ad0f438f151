#!/bin/bash
# torch2-venv.sh VENV WHEELS: make VENV, a venv over Debian's python3 (without its site packages: Debian's torch 1.13
# must not be seen) holding PyPI's torch 2 and every wheel of tests/python/torch2.txt, for the torch2 suite
# (tests/python/test_torch2.py). The wheels are kept in WHEELS (under the build directory): a venv made again
# installs from there without any index, and only a missing wheel is downloaded. Done once: VENV/.stamp marks a
# finished venv. On any failure (no network, a missing wheel) it removes the half venv, writes the reason on one line
# to VENV.failed (the tests print it when they skip) and exits 0: the torch2 tests then skip, they never fail for
# want of a download. Durations (download, install) are printed and kept in VENV/.timing.
set -u
venv=$(realpath -m "$1")
wheels=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
lock=$here/torch2.txt
py=${PL_TORCH2_BASE_PYTHON:-/usr/bin/python3}
[ -f "$venv/.stamp" ] && [ "$venv/.stamp" -nt "$lock" ] && exit 0
rm -rf "$venv" "$venv.failed"
mkdir -p "$wheels"
log=$(mktemp)
fail() {
  echo "torch 2 venv $venv not made: $1" | tee "$venv.failed" >&2
  sed 's/^/  /' "$log" | tail -5 >&2
  rm -rf "$venv" "$log"
  exit 0
}
# --no-cache-dir: the wheels are kept in WHEELS already; pip's own cache would hold a second copy
pip_() { "$venv/bin/python" -m pip --disable-pip-version-check --no-input --no-cache-dir "$@"; }
"$py" -m venv "$venv" >>"$log" 2>&1 || fail "$py -m venv failed (python3-venv?)"
install() { pip_ install --no-index --find-links "$wheels" --only-binary :all: -r "$lock" >>"$log" 2>&1; }
# --no-index: the lock must be complete (pip resolves every dependency from WHEELS alone, before installing any).
# Only when WHEELS lacks a wheel of the lock is the index asked, for those missing (none on a second run).
t0=$(date +%s) t1=$(date +%s)
if ! install; then
  pip_ download --retries 1 --timeout 20 --no-deps --only-binary :all: -d "$wheels" -r "$lock" >>"$log" 2>&1 ||
    fail "pip download -r tests/python/torch2.txt failed (no network?)"
  t1=$(date +%s)
  install || fail "pip install from $wheels failed"
fi
t2=$(date +%s)
got=$("$venv/bin/python" -c 'import torch; print(torch.__version__, torch.__file__)' 2>>"$log") ||
  fail "torch does not import in the venv"
case $got in
  "2."*" $venv/"*) ;;
  *) fail "the venv's torch is not PyPI's torch 2: $got" ;;
esac
rm -f "$log"
echo "download $((t1 - t0)) s, install $((t2 - t1)) s" > "$venv/.timing"
touch "$venv/.stamp"
echo "torch 2 venv $venv: torch ${got%% *}, $(grep -c '^[a-z]' "$lock") pinned wheels ($(cat "$venv/.timing"))"
