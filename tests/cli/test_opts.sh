#!/bin/sh
# The option grammar of plateau run, attach and watch (cli/opts.h): one token is one option spelled in full
# (no abbreviation, no --opt=VALUE, no bundled short options); a missing value, an unknown option and a bad value
# each get their one line and exit 2; run's options stop at the first operand or "--" and what follows is the
# command's, never reordered (`plateau run -o D -- sh -c ... x --help -o y` gives sh "--help -o y"); attach and watch
# take options and operands in any order. Parses only: nothing is traced but a `true` or `sh -c` run (preloads).
# usage: test_opts.sh PLATEAU WORKDIR
set -eu
P=$(realpath "$1") work=$(realpath "$2")/options-$$
rm -rf "$work"; mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; echo "== stdout"; cat out.txt >&2; echo "== stderr"; cat err.txt >&2; exit 1; }
# expect RC FIRST-STDERR-LINE ARGS...: exit status and the first line on stderr ('' = nothing on stderr)
expect() {
    want_rc=$1 want=$2; shift 2
    rc=0; "$P" "$@" >out.txt 2>err.txt </dev/null || rc=$?
    [ "$rc" = "$want_rc" ] || fail "plateau $*: exit $rc, not $want_rc"
    got=$(head -n 1 err.txt)
    [ "$got" = "$want" ] || fail "plateau $*: said '$got', not '$want'"
}
# runs RC ARGS...: the exit status only (a run says where its traces are on stderr)
runs() {
    want_rc=$1; shift
    rc=0; "$P" "$@" >out.txt 2>err.txt </dev/null || rc=$?
    [ "$rc" = "$want_rc" ] || fail "plateau $*: exit $rc, not $want_rc"
}
U=2
expect $U "plateau run: unknown option '--sample'" run --sample 1K -- true
expect $U "plateau run: unknown option '--sample-bytes=1K'" run --sample-bytes=1K -- true
expect $U "plateau run: unknown option '--no'" run --no -- true
expect $U "plateau run: unknown option '-od'" run -od -- true
expect $U "plateau run: unknown option '-ho'" run -ho
expect $U "plateau run: unknown option '--help=x'" run --help=x
expect $U "plateau run: unknown option '-'" run -o d -
expect $U "plateau run: option '-o' needs a value" run -o
expect $U "plateau run: option '--run-steps' needs a value" run --run-steps
expect $U "plateau run: --run-steps '0' is not a step count >= 1" run --run-steps 0 -- true
expect $U "plateau run: --interval-ms '0' is not an integer in [1, 60000]" run --interval-ms 0 -- true
expect $U "plateau run: --host-allocator 'tcmalloc': use glibc or jemalloc" run --host-allocator tcmalloc -- true
expect $U "plateau run: no command given" run --no-report --
expect 0 "" run -h
grep -q '^usage: plateau run' out.txt || fail "run -h: no usage on stdout"
# the command's own arguments: after the first operand, or after "--", nothing is ours, nothing moves
runs 0 run --no-report --no-live -o r1 sh -c 'echo "$@" >args.txt' x --help -o y
[ "$(cat args.txt)" = "--help -o y" ] || fail "the command got '$(cat args.txt)', not '--help -o y'"
runs 0 run --no-report --no-live -o r2 -- sh -c 'echo "$@" >args2.txt' x -- --no-report
[ "$(cat args2.txt)" = "-- --no-report" ] || fail "the command got '$(cat args2.txt)', not '-- --no-report'"
runs 0 run --no-report --no-live -o -h -- true     # a value is the next argument, whatever it looks like
[ -d ./-h ] || fail "-o -h made no directory '-h'"
expect 127 "plateau run: cannot run '-': No such file or directory" run --no-report --no-live -o r3 -- -
# attach: options and PIDs in any order; "--" and "-" are not options it knows
expect $U "plateau attach: unknown option '--'" attach -- 3999999
expect $U "plateau attach: unknown option '-'" attach 3999999 -
expect $U "plateau attach: unknown option '--no'" attach --no 3999999
expect $U "plateau attach: unknown option '--interval-ms=5'" attach --interval-ms=5 3999999
expect $U "plateau attach: option '-o' needs a value" attach 3999999 -o
expect $U "plateau attach: --run-steps '0' is not a step count >= 1" attach 3999999 --run-steps 0
expect $U "plateau attach: 'abc' is not a process id" attach --no-gpu abc
expect $U "plateau attach: no PID given" attach --no-gpu
expect $U "plateau attach: --step-pattern reads the log given by --steps-from FILE" attach 3999999 --step-pattern x
expect $U "plateau attach: no process 3999999 (it does not exist, or has ended)" attach 3999999 --no-gpu
# watch: the one RUN_DIR anywhere; everything else it does not know is an unexpected argument
expect $U "plateau watch: unexpected argument '--interval'" watch --interval
expect $U "plateau watch: unexpected argument '--inter'" watch --inter 1 d
expect $U "plateau watch: unexpected argument '--'" watch -- d
expect $U "plateau watch: unexpected argument 'b'" watch a b
expect $U "plateau watch: --interval wants seconds in [0.05, 3600], not '--once'" watch --interval --once
expect 1 "plateau watch: nodir does not exist" watch nodir --once
echo "ok: plateau run, attach and watch options"
