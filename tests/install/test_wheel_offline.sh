#!/bin/bash
# make test's wheel stage without network (tools/wheel.sh --lenient): the tools cannot be installed, so the script
# exits 0 leaving no half venv, writes the reason on one line to BUILD/wheel.failed, and install.wheel
# (test_wheel.sh) skips (exit 77) printing that reason. Without --lenient (make wheel) the same is an error.
# The index is an address nothing listens on, and pip's cache is off, so no wheel comes from anywhere.
# usage: test_wheel_offline.sh SOURCE_ROOT
set -euo pipefail
src=$(realpath "$1")
work=$(mktemp -d /tmp/pl-test-wheel-offline-XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.txt; do echo "== $f"; cat "$f"; done >&2; exit 1; }
export PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_NO_CACHE_DIR=1 PIP_FIND_LINKS=
unset PIP_EXTRA_INDEX_URL
rc=0
"$src/tools/wheel.sh" "$work/b" >"$work/strict.txt" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "make wheel without network exited 0"
rc=0
"$src/tools/wheel.sh" "$work/b" --lenient >"$work/lenient.txt" 2>&1 || rc=$?
[ $rc -eq 0 ] || fail "the lenient wheel stage exited $rc without network"
[ ! -e "$work/b/wheel-venv" ] || fail "a half venv was left in $work/b/wheel-venv"
[ "$(wc -l <"$work/b/wheel.failed")" -eq 1 ] || fail "wheel.failed is not one line"
grep -q "no network" "$work/b/wheel.failed" || fail "wheel.failed does not say why: $(cat "$work/b/wheel.failed")"
rc=0
"$src/tests/install/test_wheel.sh" "$work/b" "$src" >"$work/test.txt" 2>&1 || rc=$?
[ $rc -eq 77 ] || fail "install.wheel exited $rc, not 77 (skip)"
grep -qx "SKIP: $(cat "$work/b/wheel.failed")" "$work/test.txt" || fail "install.wheel does not print the reason"
echo "ok: without network: $(cat "$work/test.txt")"
