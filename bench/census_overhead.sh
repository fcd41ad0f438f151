#!/usr/bin/env bash
# The census's cost (docs/retention.md): a traced run with the census (default PLATEAU_CENSUS_BUDGET, 1 %) against
# the same traced run without it (PLATEAU_CENSUS_BUDGET=0), interleaved in a shuffled order each round so the
# machine's drift falls on both alike. Per script: the median over rounds of census/no-census wall and CPU ratios,
# their geometric mean with a 95% interval (mean of log ratios +- 2 standard errors), and from the last census run's
# report the censuses made and the time they took.
#   bench/census_overhead.sh [ROUNDS=5] [SCRIPT [ARGS...]]   default: bench/torch_realistic.py, then
#                                                            bench/census_heap.py (1.5 million objects in globals)
# Env: BUILD (default build), PY (default /usr/bin/python3: Debian's, with torch).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shift || true
BUILD=${BUILD:-build}
PY=${PY:-/usr/bin/python3}
plateau="$PWD/$BUILD/cli/plateau"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_mode() { # mode round script... -> "wall cpu"
    local m=$1 r=$2 out="$tmp/$1.$2"
    shift 2
    local budget=0
    [ "$m" = census ] && budget=0.01
    local TIMEFORMAT='%R %U %S' times
    times=$( { time env PLATEAU_CENSUS_BUDGET=$budget "$plateau" run --no-report -o "$out.run" -- "$PY" "$@" \
        > "$out.log" 2>&1; } 2>&1 ) || { echo "bench: $m failed" >&2; tail -5 "$out.log" >&2; exit 1; }
    if [ "$m" = census ]; then rm -rf "$tmp/last.run"; mv "$out.run" "$tmp/last.run"; else rm -rf "$out.run"; fi
    echo "$times" | awk '{ print $1, $2 + $3 }'
}

summary() {
    sort -g | awk -v label="$1" '
        { a[NR] = $1; l = log($1); s += l; ss += l * l }
        END {
            n = NR; med = (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
            m = s / n; sd = n > 1 ? sqrt((ss - n * m * m) / (n - 1)) : 0; se = sd / sqrt(n)
            printf "%-22s median %.3fx (range %.3f-%.3f), geomean %.3fx [95%%: %.3f-%.3f] over %d rounds\n",
                label, med, a[1], a[n], exp(m), exp(m - 2 * se), exp(m + 2 * se), n
        }'
}

bench_script() {
    : > "$tmp/wall"; : > "$tmp/cpu"
    local base
    base=$(basename "$1")
    for r in $(seq 1 "$rounds"); do
        declare -A w c
        for m in $(printf 'census\nnocensus\n' | shuf); do
            read -r w[$m] c[$m] < <(run_mode "$m" "$r" "$@")
        done
        echo "${w[census]} ${w[nocensus]}" | awk '{ print $1 / $2 }' >> "$tmp/wall"
        echo "${c[census]} ${c[nocensus]}" | awk '{ print $1 / $2 }' >> "$tmp/cpu"
        echo "round $r: $base census ${w[census]} s (cpu ${c[census]}), no census ${w[nocensus]} s (cpu ${c[nocensus]})"
        unset w c
    done
    summary "$base wall" < "$tmp/wall"
    summary "$base cpu" < "$tmp/cpu"
    "$plateau" report "$tmp/last.run" --json "$tmp/last.json" > /dev/null 2>&1 || true
    "$PY" - "$tmp/last.json" <<'PYEOF'
import json, sys
rep = json.load(open(sys.argv[1]))
for p in rep["run"]["processes"]:
    r = p.get("retention")
    if r:
        print("  last census run, pid %d: %d censuses, %.3f s in all (%.1f ms each), stopped short: %s, named: %d"
              % (p["pid"], r["censuses"], r["census_seconds"], 1e3 * r["census_seconds"] / max(r["censuses"], 1),
                 r["stopped_short"], r["named"]))
PYEOF
}

if [ $# -gt 0 ]; then
    bench_script "$@"
else
    bench_script "$PWD/bench/torch_realistic.py"
    bench_script "$PWD/bench/census_heap.py"
fi
