#!/bin/sh
# plateau help: `plateau help` prints the usage on stdout and exits 0 like --help; `plateau help COMMAND`
# prints that command's --help text; an unknown command is still refused with the usage on stderr.
# usage: test_help.sh PLATEAU WORKDIR
set -eu
P=$1 work=$2/help-$$
rm -rf "$work"; mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.txt; do echo "== $f"; cat "$f"; done >&2; exit 1; }

"$P" help >"$work/help.txt" 2>"$work/help.err" || fail "plateau help exits $?"
"$P" --help >"$work/dashhelp.txt" || fail "plateau --help"
cmp -s "$work/help.txt" "$work/dashhelp.txt" || fail "plateau help differs from plateau --help"
grep -q '^usage: plateau COMMAND' "$work/help.txt" || fail "no usage from plateau help"
[ ! -s "$work/help.err" ] || fail "plateau help wrote to stderr"
for c in run attach report tune replay; do
    "$P" help "$c" >"$work/help-$c.txt" || fail "plateau help $c"
    "$P" "$c" --help >"$work/dash-$c.txt" || fail "plateau $c --help"
    cmp -s "$work/help-$c.txt" "$work/dash-$c.txt" || fail "plateau help $c differs from plateau $c --help"
    grep -q "^usage: plateau $c" "$work/help-$c.txt" || fail "plateau help $c: no usage"
done
rc=0; "$P" help nosuch >"$work/nosuch.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "plateau help nosuch exits $rc, not 2"
grep -q "unknown command 'nosuch'" "$work/nosuch.txt" || fail "plateau help nosuch"
rc=0; "$P" nosuch >"$work/nosuch2.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "plateau nosuch exits $rc, not 2"
echo "ok: plateau help"
