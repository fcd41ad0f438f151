#!/bin/bash
# Integration (issue 27 item 3): memory outside malloc, in anonymous mappings a program makes through ctypes
# (tests/targets/py_mmap_cache.py), under plateau run: a cache that maps and fills a new range every step is a LEAK
# named at its mmap line; one that stops is no leak (a warmup, then flat); an arena mapped whole and filled as it goes
# raises RSS beside a flat live heap: first touch, bounded, not a leak, not allocator retention. Each mode REPEAT
# times (default 1), every run the same answer. ~20 s a run.
# Usage: test_mmap.sh PLATEAU SCRIPT [REPEAT]
set -u
P=$1 script=$2 repeat=${3:-1}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { # NAME ARGS...: record and report
    local n=$1
    shift
    "$P" run -o "$tmp/$n" --no-report -- "$py" "$script" "$@" >"$tmp/$n.out" 2>&1 || { cat "$tmp/$n.out"; fail "$n: run failed"; }
    "$P" report "$tmp/$n" >"$tmp/$n.txt" 2>"$tmp/$n.err" || fail "$n: report exited $?"
}
for k in $(seq 1 "$repeat"); do
    run grow$k --mode grow
    head -1 "$tmp/grow$k.txt" | grep -Eq '^verdict: LEAK in pid [0-9]+ \(python3 py_mmap_cache.py\): \+1.00 MiB/step of heap.bytes.*allocated at py_mmap_cache.py:[0-9]+ \(`p = libc.mmap\(None, MIB' ||
        { cat "$tmp/grow$k.txt"; fail "grow $k: not a leak named at the mmap line"; }
    run stop$k --mode stop
    head -1 "$tmp/stop$k.txt" | grep -Eq '^verdict: no leak \(warmup (9[0-9]|10[0-9]) steps, then flat\)$' ||
        { cat "$tmp/stop$k.txt"; fail "stop $k: not a warmup then flat"; }
    run touch$k --mode touch
    head -1 "$tmp/touch$k.txt" | grep -q '^verdict: no leak' || { cat "$tmp/touch$k.txt"; fail "touch $k: not 'no leak'"; }
    grep -Eq '^  - RssAnon grows 1.00 MiB/step beside a flat live heap larger than it .*touched for the first time.* Bounded: [0-9.]+ MiB more at most' "$tmp/touch$k.txt" ||
        { cat "$tmp/touch$k.txt"; fail "touch $k: first touch not said with its bound"; }
    grep -q 'host allocator keeps freed memory' "$tmp/touch$k.txt" && fail "touch $k: called allocator retention"
    echo "$k: $(head -1 "$tmp/grow$k.txt" | cut -c1-90) | $(head -1 "$tmp/stop$k.txt") | $(head -1 "$tmp/touch$k.txt")"
done
