#!/bin/bash
# framework-venv.sh VENV: make VENV, a venv over Debian's python3 with --system-site-packages (so Debian's torch 1.13
# is the only torch) holding the pinned frameworks of tests/python/frameworks.txt, for python.*_real.
# Done once: VENV/.stamp marks a finished venv. On any failure (no network, a missing wheel) it removes the half
# venv, writes the reason on one line to VENV.failed (the tests print it when they skip) and exits 0: the framework
# tests then skip, they never fail for want of a download.
set -u
venv=$1
here=$(cd "$(dirname "$0")" && pwd)
py=${PL_FRAMEWORK_BASE_PYTHON:-/usr/bin/python3}
[ -f "$venv/.stamp" ] && [ "$venv/.stamp" -nt "$here/frameworks.txt" ] && exit 0
rm -rf "$venv" "$venv.failed"
log=$(mktemp)
fail() {
  echo "framework venv $venv not made: $1" | tee "$venv.failed" >&2
  sed 's/^/  /' "$log" | tail -5 >&2
  rm -rf "$venv" "$log"
  exit 0
}
torch=$("$py" -c 'import torch; print(torch.__version__)' 2>>"$log") || fail "$py cannot import torch (python3-torch)"
"$py" -m venv --system-site-packages "$venv" >>"$log" 2>&1 || fail "$py -m venv failed (python3-venv?)"
# the constraint keeps the installed torch even if a later edit drops --no-deps: no PyPI torch version matches it
echo "torch==$torch" > "$venv/constraints.txt"
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input --retries 1 --timeout 20 --no-deps \
  --only-binary :all: -c "$venv/constraints.txt" -r "$here/frameworks.txt" >>"$log" 2>&1 ||
  fail "pip install -r tests/python/frameworks.txt failed (no network?)"
got=$("$venv/bin/python" -c 'import torch; print(torch.__version__, torch.__file__)' 2>>"$log") ||
  fail "torch does not import in the venv"
case $got in
  "$torch /usr/lib/"*) ;;
  *) fail "the venv's torch is not Debian's $torch: $got" ;;
esac
rm -f "$log"
touch "$venv/.stamp"
echo "framework venv $venv: Debian's torch $torch, $(grep -c '^[a-z]' "$here/frameworks.txt") pinned packages"
