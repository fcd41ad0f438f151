#!/bin/sh
# The README's allocator demo shows the fix working: each `PLATEAU_SIM_DEVICE=... plateau-alloc-demo`
# line of README.md runs as written (build/cli/ replaced by this build's directory); the one commented "out of
# memory" must run out of memory and say which setting to try, the one commented "fits" must finish.
# usage: test_readme_demo.sh README.md PLATEAU_ALLOC_DEMO
set -eu
readme=$1 demo=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
grep '^PLATEAU_SIM_DEVICE=.*plateau-alloc-demo' "$readme" >/tmp/readme-demo-$$.txt || fail "no demo lines in README"
trap 'rm -f /tmp/readme-demo-$$.txt' EXIT
n_oom=0 n_fit=0
while IFS= read -r line; do
    cmd=${line%%#*} want=${line#*#}
    # VAR=value ... build/allocator/plateau-alloc-demo ARGS: run it with env, our demo binary in place of the path
    set -- $cmd
    envs= args= seen=false
    for w in "$@"; do
        case $w in
        */plateau-alloc-demo) seen=true ;;
        *=*) $seen && args="$args $w" || envs="$envs $w" ;;
        *) args="$args $w" ;;
        esac
    done
    $seen || fail "no plateau-alloc-demo in: $line"
    rc=0
    out=$(env -u PLATEAU_ALLOC_CONF -u PYTORCH_CUDA_ALLOC_CONF $envs "$demo" $args 2>&1) || rc=$?
    case $want in
    *"out of memory"*)
        [ "$rc" = 1 ] || fail "expected out of memory (exit 1), got $rc: $line"
        echo "$out" | grep -q 'out of memory on device 0' || fail "no OOM message: $line"
        echo "$out" | grep -q 'expandable_segments:True' || fail "the OOM message does not name the setting: $line"
        n_oom=$((n_oom + 1)) ;;
    *fits*)
        [ "$rc" = 0 ] || { echo "$out" >&2; fail "expected the demo to fit, got exit $rc: $line"; }
        echo "$out" | grep -q 'num_ooms 0' || fail "OOMs reported: $line"
        n_fit=$((n_fit + 1)) ;;
    *) fail "README demo line says neither 'out of memory' nor 'fits': $line" ;;
    esac
done </tmp/readme-demo-$$.txt
[ "$n_oom" -ge 1 ] && [ "$n_fit" -ge 1 ] || fail "README needs one failing and one fitting demo line ($n_oom, $n_fit)"
echo "ok: README demo ($n_oom out of memory, $n_fit fits)"
