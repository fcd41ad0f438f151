#!/bin/sh
# Integration: names from traces and directories never reach the terminal raw. A program run with
# argv[0] = ESC ] 0 ; PWNED BEL ESC [ 31 m EVIL (bash's exec -a), in a run directory whose name holds ESC [ 2 J,
# beside a damaged trace whose file name holds ESC and a newline: neither plateau run's output (its report
# included) nor plateau report's holds an ESC or BEL byte, and the names show escaped (\x1b, \x07, \n).
# usage: test_escape.sh PLATEAU TARGETS_DIR WORKDIR
set -eu
P=$1 T=$2 work=$3/escape-$$
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; cat -v "$work/out.txt" >&2; exit 1; }
command -v bash >/dev/null || { echo "bash not found: skipped"; exit 77; }
ESC=$(printf '\033') BEL=$(printf '\007')
d="$work/run$(printf '\033[2J')"
# no raw control byte, and the escaped form is there
check() {
    if grep -q "[$ESC$BEL]" "$work/out.txt"; then fail "$1: a raw ESC or BEL byte reached the output"; fi
    grep -qF "$2" "$work/out.txt" || fail "$1: '$2' not in the output"
}

"$P" run -o "$d" -- bash -c 'exec -a "$(printf "\033]0;PWNED\007\033[31mEVIL")" "$0" 3' "$T/target_leak" \
    >"$work/out.txt" 2>&1 || fail "plateau run"
check "plateau run" 'process '
check "plateau run" '\x1b]0;PWNED\x07\x1b[31mEVIL'
check "plateau run" 'run\x1b[2J'

trace=$(ls "$d"/*.pltrace | tail -n1)
head -c 200 "$trace" >"$d/$(printf 'x\033[31m\nname').pltrace"
"$P" report "$d" >"$work/out.txt" 2>&1 || fail "plateau report"
check "plateau report" '\x1b]0;PWNED\x07\x1b[31mEVIL'
check "plateau report" 'x\x1b[31m\nname.pltrace'
echo ok
