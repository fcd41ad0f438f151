#!/bin/bash
# longrun_bench: the traces of a long multi-rank job and `plateau report --merge` on them (docs/long-runs.md).
#   bench/longrun_bench.sh [BUILD=build] [RANKS=64] [HOURS=0.25] [STEPS_PER_S=11] [MODES="full bounded"]
# Generates RANKS ranks (8 per node, one run directory per node) of HOURS of bench/torch_realistic.py's record mix
# (bench/longrun_gen.c), once as full traces (PLATEAU_TRACE_FULL=1) and once bounded (plateau run's default), then
# times `plateau report --merge` over the node directories with /usr/bin/time -v (wall, CPU, peak RSS), and prints
# bytes per process-hour, the total, and the 72-hour total. The report's time is its analysis (per process and
# metric, on at most 8,192 points: the same at 1 h as at 72 h once a run has 16,384 steps) plus reading (linear in
# the bytes): run it at two lengths to tell them apart (bench/RESULTS.md, "Long runs"). Its memory does not grow
# with the run's length. Needs ~RANKS*HOURS*100 MB of free space in $TMPDIR (or /tmp) in full mode, a fifth bounded.
#   bench/longrun_bench.sh BUILD job [RANKS=64] [HOURS=72] [STEPS_PER_S=11]
# The whole job, bounded: one rank generated for HOURS, cloned to RANKS ranks (longrun_gen clone: each its own pid,
# rank and node), `plateau report --merge` over the node directories. Needs ~RANKS*HOURS*5 MB (23 GB for 64 x 72 h).
set -euo pipefail
build=${1:-build}
if [ "${2:-}" = job ]; then
  ranks=${3:-64}; hours=${4:-72}; sps=${5:-11}
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/plateau-longrun-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$build/bench/longrun_gen" bounded "$tmp/one" 1 "$hours" "$sps"
  "$build/bench/longrun_gen" clone "$tmp/one/1000.0.pltrace" "$tmp/job" "$ranks"
  rm -rf "$tmp/one"
  echo "$ranks ranks x $hours h: $(du -sb "$tmp/job" | cut -f1) bytes"
  /usr/bin/time -v "$build/cli/plateau" report --merge "$tmp/job"/node* >"$tmp/report" 2>"$tmp/time" || true
  grep -E 'Elapsed|Maximum resident|User time|System time' "$tmp/time"
  head -1 "$tmp/report"
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
ranks=${2:-64}; hours=${3:-0.25}; sps=${4:-11}; modes=${5:-full bounded}
gen="$build/bench/longrun_gen"; plateau="$build/cli/plateau"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plateau-longrun-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in $modes; do
  "$gen" "$mode" "$tmp/$mode" "$ranks" "$hours" "$sps" >"$tmp/$mode.gen"
  # one run directory per node of 8 ranks, as a multi-node job leaves them
  dirs=()
  for f in "$tmp/$mode"/*.pltrace; do
    pid=$(basename "$f" .0.pltrace); node=$(( (pid - 1000) / 8 ))
    mkdir -p "$tmp/$mode/node$node"; mv "$f" "$tmp/$mode/node$node/"
  done
  for d in "$tmp/$mode"/node*; do dirs+=("$d"); done
  bytes=$(du -cb "$tmp/$mode"/node*/*.pltrace | tail -1 | cut -f1)
  /usr/bin/time -v "$plateau" report --merge "${dirs[@]}" >"$tmp/$mode.report" 2>"$tmp/$mode.time" || true
  wall=$(grep 'Elapsed (wall clock)' "$tmp/$mode.time" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$tmp/$mode.time" | awk '{print $NF}')
  cpu=$(awk -F': ' '/User time|System time/ {c += $2} END {print c}' "$tmp/$mode.time")
  secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  awk -v m="$mode" -v b="$bytes" -v r="$ranks" -v h="$hours" -v s="$secs" -v k="$rss" -v c="$cpu" 'BEGIN {
    ph = b / r / h; printf "%-8s %d ranks x %.3g h: %.1f MB per process-hour, %.2f GB in all; report --merge %.1f s wall (%.1f s CPU), peak RSS %.0f MB\n", m, r, h, ph / 1e6, b / 1e9, s, c, k / 1024;
    printf "%-8s 64 ranks x 72 h would write %.0f GB\n", m, ph * 64 * 72 / 1e9 }'
  head -1 "$tmp/$mode.report"
  rm -rf "${tmp:?}/$mode"
done
