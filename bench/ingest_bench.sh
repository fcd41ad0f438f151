#!/bin/bash
# ingest_bench: how fast `plateau report` reads a real, every-call-sampled trace of about 1 GB (issue 13 part 2:
# >= 100 MB/s with bounded memory). report_bench.c times a synthetic step-heavy trace with no sampled allocations;
# this one records a real program under the real preload instead:
#   plateau-train (build/training) --layers 2 --channels 32 --heads 2 --seq 32 --batch 1 --threads 1, traced with
#   PLATEAU_SAMPLE_BYTES=0 (every malloc/free recorded with its stack) and PLATEAU_BUFFER_BYTES=1M (the largest
#   buffers, so the writer keeps up). Per step: ~240 host_alloc + ~240 host_free, ~100 device_alloc + ~100
#   device_free, heap/alloc_stats/step records; stack/frame/module records once per new call site. ~31 KB/step.
# Then it times `plateau report TRACE` (extract + analyze + text render; stdout to /dev/null) with /usr/bin/time:
# wall seconds, MB/s (trace bytes / 1e6 / wall), peak RSS (max resident set, KiB -> MB), and CPU seconds (user + sys:
# steadier than wall on a shared machine) with MB per CPU second. With several plateau
# binaries (e.g. before and after a change) the runs are interleaved: A B A B ...
# The lost-record count of the trace comes from the report's JSON (lost_records).
#
# Usage: bench/ingest_bench.sh BUILD_DIR [MB=1024] [REPS=3] [PLATEAU_BIN...]
#   BUILD_DIR: where preload/libplateau_preload.so, training/plateau-train and cli/plateau are (the latter is the
#   default binary to time). INGEST_TRACE=FILE: time an existing trace instead of recording one (kept).
#   INGEST_KEEP=DIR: record into DIR and keep the trace there (reused by later runs with INGEST_TRACE).
set -eu
B=${1:?usage: ingest_bench.sh BUILD_DIR [MB] [REPS] [PLATEAU_BIN...]}
MB=${2:-1024}
REPS=${3:-3}
shift $(($# < 3 ? $# : 3))
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=("$B/cli/plateau")
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "ingest_bench: needs GNU time at /usr/bin/time" >&2; exit 77; }
# the trace is recorded into /dev/shm when there is one: on a busy machine, writeback of a 1 GB file on disk stalls
# the writer and records are lost (49 % with a faster program); tmpfs keeps the writer's pace steady
shm=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && shm=/dev/shm
tmp=$(mktemp -d -p "$shm")
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"

trace=${INGEST_TRACE:-}
if [ -z "$trace" ]; then
    dir=${INGEST_KEEP:-$tmp/run}
    mkdir -p "$dir"
    steps=$((MB * 32)) # ~31 KB per step (measured: 1000 steps -> 30.9 MB)
    t0=$(date +%s.%N)
    PLATEAU_SAMPLE_BYTES=0 PLATEAU_BUFFER_BYTES=1M PLATEAU_DIR="$dir" LD_PRELOAD="$B/preload/libplateau_preload.so" \
        "$B/training/plateau-train" --steps "$steps" --layers 2 --channels 32 --heads 2 --seq 32 --batch 1 \
        --threads 1 >/dev/null 2>&1
    t1=$(date +%s.%N)
    trace=$(ls -S "$dir"/*.pltrace | head -1)
    echo "recorded: $trace, $steps steps in $(echo "$t1 - $t0" | bc) s"
fi
bytes=$(stat -c %s "$trace")
"${BINS[0]}" report "$trace" --json "$tmp/r.json" >/dev/null 2>&1 || true
python3 - "$tmp/r.json" "$bytes" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
procs = r.get("run", {}).get("processes", [])
lost = sum(p.get("lost_records", 0) or 0 for p in procs)
ev = sum(p.get("host_events", 0) or 0 for p in procs)
print(f"trace: {int(sys.argv[2]) / 1e6:.0f} MB, lost records: {lost} (host allocation events: {ev})")
PY

for ((k = 1; k <= REPS; k++)); do
    for b in "${BINS[@]}"; do
        rc=0
        $TIME -f "%e %M %U %S" -o "$tmp/t" "$b" report "$trace" >/dev/null 2>&1 || rc=$?
        read -r wall rss usr sys <"$tmp/t" || true
        [ "$rc" -le 3 ] || { echo "ingest_bench: $b report failed (exit $rc)" >&2; exit 1; }
        awk -v b="$b" -v k="$k" -v w="$wall" -v r="$rss" -v n="$bytes" -v c="$usr" -v s="$sys" \
            'BEGIN { printf "run %d %s: %.2f s, %.1f MB/s, peak RSS %.1f MB; CPU %.2f s (%.1f MB per CPU s)\n",
                     k, b, w, n / 1e6 / w, r / 1024, c + s, n / 1e6 / (c + s) }'
    done
done
