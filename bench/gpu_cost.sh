#!/usr/bin/env bash
# Where the tracer's cost on a CUDA training loop goes (on a GPU machine; docs/gpu-check.md, step 6 gives the
# total). Runs tests/gpu/train_cuda.py --mode healthy untraced and traced under each configuration below, rounds
# interleaved configuration by configuration, and prints per configuration the median of the training loop's
# seconds, of its second half's (the steady state, after the tracer's early work), and their ratios to untraced.
#
#   bench/gpu_cost.sh TREE OUTDIR [ROUNDS [STEPS]]      TREE: a build tree or a gpu-bundle; PY: python with torch
#
# Configurations: each switches one part of the tracer off (docs/env.md), so the default's cost minus one's is
# that part's share.
set -u
TREE=${1:?usage: bench/gpu_cost.sh TREE OUTDIR [ROUNDS [STEPS]]}
OUTD=${2:?usage: bench/gpu_cost.sh TREE OUTDIR [ROUNDS [STEPS]]}
ROUNDS=${3:-2}
STEPS=${4:-600}
PY=${PY:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PLATEAU=$TREE/cli/plateau
# (plateau itself needs nothing from a bundle's gpu-libs/, and torch must keep its own OpenMP: no LD_LIBRARY_PATH)
unset PYTORCH_CUDA_ALLOC_CONF PLATEAU_ALLOC_CONF
mkdir -p "$OUTD"
CONFIGS=(untraced default "PLATEAU_PSS=0" "PLATEAU_CUPTI=0" "PLATEAU_PYTHON=0"
         "PLATEAU_CENSUS_BUDGET=0 PLATEAU_TENSOR_BUDGET=0" "PLATEAU_PY_FRAMES=0" "PLATEAU_SAMPLE_BYTES=64M")
: > "$OUTD/times.tsv"
for r in $(seq "$ROUNDS"); do
    for i in "${!CONFIGS[@]}"; do
        c=${CONFIGS[$i]} j=$OUTD/c$i.r$r.json
        if [ "$c" = untraced ]; then
            "$PY" "$ROOT/tests/gpu/train_cuda.py" --mode healthy --steps "$STEPS" --stats "$j" > "$OUTD/c$i.r$r.out" 2>&1
        else
            rm -rf "${OUTD:?}/run.c$i.r$r"
            # shellcheck disable=SC2086  # the configuration is a list of assignments
            env ${c/default/} "$PLATEAU" run -o "$OUTD/run.c$i.r$r" --no-report -- "$PY" "$ROOT/tests/gpu/train_cuda.py" \
                --mode healthy --steps "$STEPS" --stats "$j" > "$OUTD/c$i.r$r.out" 2>&1
        fi
        rc=$?
        "$PY" - "$j" "$c" "$r" "$rc" >> "$OUTD/times.tsv" <<'PYEOF'
import json, sys
j, c, r, rc = sys.argv[1:]
try:
    d = json.load(open(j))
    print("%s\t%s\t%s\t%.4f\t%.4f" % (c, r, rc, d["loop_seconds"], d["second_half_seconds"]))
except Exception as e:
    print("%s\t%s\t%s\tnan\tnan" % (c, r, rc))
PYEOF
    done
done
"$PY" - "$OUTD/times.tsv" "$STEPS" "$ROUNDS" <<'PYEOF' | tee "$OUTD/table.txt"
import math, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
by = {}
for c, r, rc, loop, half in rows:
    by.setdefault(c, []).append((float(loop), float(half), rc))
base = by.get("untraced")
bl = statistics.median(x[0] for x in base) if base else math.nan
bh = statistics.median(x[1] for x in base) if base else math.nan
print("%s steps, %s rounds interleaved; loop = the whole training loop, 2nd half = its last %d steps" %
      (sys.argv[2], sys.argv[3], int(sys.argv[2]) - int(sys.argv[2]) // 2))
print("%-50s %9s %9s %7s %7s  %s" % ("configuration", "loop s", "2nd half", "ratio", "ratio2", "exit"))
for c, xs in by.items():
    l = statistics.median(x[0] for x in xs)
    h = statistics.median(x[1] for x in xs)
    print("%-50s %9.3f %9.3f %7.3f %7.3f  %s" % (c, l, h, l / bl, h / bh, ",".join(x[2] for x in xs)))
PYEOF
