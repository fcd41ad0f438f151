#!/bin/bash
# integrations-venv.sh VENV: make VENV, a venv over Debian's python3 with --system-site-packages (Debian's torch 1.13
# and numpy stay the only ones: a constraints file pins them) holding tests/python/integrations.txt, for the tests
# of plateau's pytest plugin, of `plateau watch --prometheus` and of the callbacks' loggers.
# Done once: VENV/.stamp marks a finished venv. On any failure (no network, a missing wheel) it removes the half
# venv, writes the reason on one line to VENV.failed (the tests print it when they skip) and exits 0: those tests
# then skip, they never fail for want of a download.
set -u
venv=$1
here=$(cd "$(dirname "$0")" && pwd)
py=${PL_FRAMEWORK_BASE_PYTHON:-/usr/bin/python3}
[ -f "$venv/.stamp" ] && [ "$venv/.stamp" -nt "$here/integrations.txt" ] && exit 0
rm -rf "$venv" "$venv.failed"
log=$(mktemp)
fail() {
  echo "integrations venv $venv not made: $1" | tee "$venv.failed" >&2
  sed 's/^/  /' "$log" | tail -5 >&2
  rm -rf "$venv" "$log"
  exit 0
}
versions=$("$py" -c 'import torch, numpy; print(torch.__version__, numpy.__version__)' 2>>"$log") ||
  fail "$py cannot import torch and numpy (python3-torch)"
read -r torch numpy <<< "$versions"
"$py" -m venv --system-site-packages "$venv" >>"$log" 2>&1 || fail "$py -m venv failed (python3-venv?)"
printf 'torch==%s\nnumpy==%s\n' "$torch" "$numpy" > "$venv/constraints.txt"
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input --retries 1 --timeout 20 \
  --only-binary :all: -c "$venv/constraints.txt" -r "$here/integrations.txt" >>"$log" 2>&1 ||
  fail "pip install -r tests/python/integrations.txt failed (no network?)"
"$venv/bin/python" -c 'import torch, pytest, pytest_memray, prometheus_client, tensorboard, wandb' >>"$log" 2>&1 ||
  fail "the venv's packages do not import"
rm -f "$log"
touch "$venv/.stamp"
echo "integrations venv $venv: Debian's torch $torch, $(grep -c '^[a-z]' "$here/integrations.txt") pinned packages"
