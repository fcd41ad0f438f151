#!/bin/bash
# bench/replay_paired.sh: before/after replay speed on a VM whose speed drifts over minutes.
# Runs two replay_bench binaries alternately (pinned to one CPU), PROCS times each, on both generated sequences;
# each process reports its best of 3 repeats (CPU-time Mev/s, defaults config); prints median and max per binary.
# usage: bench/replay_paired.sh BEFORE_BIN AFTER_BIN [PROCS=9] [EVENTS=10000000]
set -eu
before=$1 after=$2 procs=${3:-9} n=${4:-10000000}
cpu=$(( $(nproc) - 1 ))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for seq in random training; do
    : > "$tmp/before"
    : > "$tmp/after"
    for _ in $(seq "$procs"); do
        for v in before after; do
            bin=$before
            [ "$v" = after ] && bin=$after
            taskset -c "$cpu" "$bin" "$n" --seq "$seq" --path fast --no-grid --configs 0 --repeat 3 |
                awk '/^\(defaults\)/ { if ($6 > m) m = $6 } END { print m }' >> "$tmp/$v"
        done
    done
    for v in before after; do
        sort -n "$tmp/$v" | awk -v s="$seq" -v v="$v" '{ a[NR] = $1 } END { printf "%s %s: median %s max %s (Mev/s cpu, %d processes)\n", s, v, a[int((NR + 1) / 2)], a[NR], NR }'
    done
done
