#!/usr/bin/env bash
# The live tensor count's cost (docs/python.md, "When a count runs"): a traced run with the counts at the default
# PLATEAU_TENSOR_BUDGET (0.01: steady 1 %, early rule 5 %) against the same traced run without them (=0), in a
# shuffled order each round so the machine's drift falls on both alike. The median over rounds of counts/no-counts
# wall and CPU ratios, their geometric mean with a 95% interval (mean of log ratios +- 2 standard errors), and, from
# each counting run, the counts made and the time they took as the bootstrap measured it (read at exit by a wrapper
# that both modes run under) with the share of that run's wall time.
#   bench/tensor_overhead.sh [ROUNDS=5] [SCRIPT [ARGS...]]   default: tests/python/tensors/total_loss.py (300 steps)
# Env: BUILD (default build), PY (default /usr/bin/python3: Debian's, with torch), BUDGET (default 0.01).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shift || true
BUILD=${BUILD:-build}
PY=${PY:-/usr/bin/python3}
BUDGET=${BUDGET:-0.01}
plateau="$PWD/$BUILD/cli/plateau"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_mode() { # mode round script... -> "wall cpu"
    local m=$1 r=$2 out="$tmp/$1.$2"
    shift 2
    local budget=0
    [ "$m" = counts ] && budget=$BUDGET
    local TIMEFORMAT='%R %U %S' times
    times=$( { time env PLATEAU_TENSOR_BUDGET=$budget "$plateau" run --no-report -o "$out.run" -- "$PY" \
        bench/counts_at_exit.py "$@" > "$out.log" 2>&1; } 2>&1 ) || { echo "bench: $m failed" >&2; tail -5 "$out.log" >&2; exit 1; }
    rm -rf "$out.run"
    if [ "$m" = counts ]; then grep '^COUNTS' "$out.log" >> "$tmp/counts" || true; fi
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

[ $# -gt 0 ] || set -- "$PWD/tests/python/tensors/total_loss.py"
: > "$tmp/wall"; : > "$tmp/cpu"; : > "$tmp/counts"
base=$(basename "$1")
for r in $(seq 1 "$rounds"); do
    declare -A w c
    for m in $(printf 'counts\nnocounts\n' | shuf); do
        read -r w[$m] c[$m] < <(run_mode "$m" "$r" "$@")
    done
    echo "${w[counts]} ${w[nocounts]}" | awk '{ print $1 / $2 }' >> "$tmp/wall"
    echo "${c[counts]} ${c[nocounts]}" | awk '{ print $1 / $2 }' >> "$tmp/cpu"
    echo "round $r: $base counts ${w[counts]} s (cpu ${c[counts]}), no counts ${w[nocounts]} s (cpu ${c[nocounts]}); $(tail -1 "$tmp/counts" | awk '{ printf "%d counts in %d steps, %.3f s, %.1f %% of the run", $2, $4, $3, 100 * $3 / $5 }')"
    unset w c
done
summary "$base wall" < "$tmp/wall"
summary "$base cpu" < "$tmp/cpu"
