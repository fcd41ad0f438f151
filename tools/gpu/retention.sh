#!/usr/bin/env bash
# The retention corpus (tests/python/retention: 23 unmodified loops, leaks and controls) on a GPU: every script with
# torch's default device set to cuda (PL_RETENTION_DEVICE, tests/python/test_retention.py), untraced and under
# `plateau run`; the report must name each leak's holder with the line that grows it, and no holder for a control.
# Scripts run JOBS at a time (one GPU is plenty for these small loops).
#
#   tools/gpu/retention.sh TREE OUTDIR [JOBS [SCRIPT ...]]     TREE: a build tree or gpu-bundle; PY: python with torch
#
# Prints one line per script (ok/FAIL, as test_retention.py says it) and a summary; exit 1 when one failed.
set -u
TREE=${1:?usage: tools/gpu/retention.sh TREE OUTDIR [JOBS [SCRIPT ...]]}
OUTD=${2:?usage: tools/gpu/retention.sh TREE OUTDIR [JOBS [SCRIPT ...]]}
JOBS=${3:-8}
shift $(( $# < 3 ? $# : 3 ))
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PL_PLATEAU=$TREE/cli/plateau PL_SRC=$ROOT PL_PYTHON_DIR=$TREE/python PL_TORCH_PYTHON=${PY:-python3} \
    PL_RETENTION_DEVICE=${PL_RETENTION_DEVICE:-cuda}
unset PYTORCH_CUDA_ALLOC_CONF PLATEAU_ALLOC_CONF
mkdir -p "$OUTD"
if [ $# -gt 0 ]; then printf '%s\n' "$@"; else ls "$ROOT/tests/python/retention" | sed -n 's/\.py$//p'; fi |
    xargs -P "$JOBS" -I{} sh -c 'python3 "$PL_SRC/tests/python/test_retention.py" {} > "$0/{}.log" 2>&1; echo "$? {}"' "$OUTD" \
    > "$OUTD/status.txt"
fail=0
for log in "$OUTD"/*.log; do
    line=$(grep -m1 -E '^(ok|FAIL):' "$log" || echo "FAIL: $(basename "$log" .log): $(tail -1 "$log")")
    echo "${line:0:400}"
    case $line in ok:*) ;; *) fail=$((fail + 1)) ;; esac
done | tee "$OUTD/summary.txt"
bad=$(grep -vc '^ok:' "$OUTD/summary.txt")
echo "retention on ${PL_RETENTION_DEVICE}: $(grep -c '^ok:' "$OUTD/summary.txt") ok, $bad failed" | tee -a "$OUTD/summary.txt"
[ "$bad" -eq 0 ]
