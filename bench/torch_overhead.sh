#!/usr/bin/env bash
# The tracer's cost on an ordinary PyTorch script (bench/torch_realistic.py: DataLoader workers, validation
# workers that come and go, AdamW, LR warmup, clipping), against the same script untraced, and the peers on the
# same script in the same run. Modes run in a shuffled order each round, so the machine's drift (1.5x over
# minutes here) falls on every mode alike. Per mode: the median over rounds of each round's traced/plain wall
# ratio with its range, and the geometric mean of those ratios with a 95% interval (mean of the log ratios +- 2
# standard errors): a target is met only when the interval's upper end is under it. The same for CPU time (user +
# sys of the whole process tree, DataLoader workers included), which the machine's drift moves less than wall time.
#   bench/torch_overhead.sh [ROUNDS=5] [-- SCRIPT ARGS...]
# Env: BUILD (default build), PY (default /usr/bin/python3: Debian's, with torch), MEMRAY (a memray executable;
# default: none, skipped; MEMRAY_NATIVE=0 leaves out its --native mode), HEAPTRACK (a heaptrack executable; default: none, skipped). heaptrack is 10x+ slower
# on this script, so it runs in the first round only (its ratio is that one round's). BASE (the build folder of
# another checkout, e.g. /tmp/main/build): adds mode plateau-base, that build's plateau, to compare two versions in
# the same shuffled rounds. NOPSS=0 leaves out the PLATEAU_PSS=0 mode.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shift || true
[ "${1:-}" = "--" ] && shift
script_args=("$@")
BUILD=${BUILD:-build}
PY=${PY:-/usr/bin/python3}
plateau="$PWD/$BUILD/cli/plateau"
script="$PWD/bench/torch_realistic.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

modes=(plain plateau plateau-nopss)
[ "${NOPSS:-1}" = 0 ] && modes=(plain plateau)  # NOPSS=0: leave out the PLATEAU_PSS=0 mode
[ -n "${MEMRAY:-}" ] && modes+=(memray)
[ -n "${MEMRAY:-}" ] && [ "${MEMRAY_NATIVE:-1}" != 0 ] && modes+=(memray-native)
heaptrack_bin=${HEAPTRACK:-}
[ -n "$heaptrack_bin" ] && modes+=(heaptrack)
[ -n "${BASE:-}" ] && modes+=(plateau-base)

run_mode() { # mode round -> prints "wall_seconds cpu_seconds"
    local m=$1 r=$2 out="$tmp/$1.$2"
    local cmd=("$PY" "$script" "${script_args[@]}")
    case $m in
    plain) ;;
    plateau) cmd=("$plateau" run --no-report -o "$out.run" -- "${cmd[@]}") ;;
    plateau-nopss) cmd=(env PLATEAU_PSS=0 "$plateau" run --no-report -o "$out.run" -- "${cmd[@]}") ;;
    plateau-base) cmd=("$BASE/cli/plateau" run --no-report -o "$out.run" -- "${cmd[@]}") ;;
    memray) cmd=("$MEMRAY" run -q -o "$out.bin" "$script" "${script_args[@]}") ;;
    memray-native) cmd=("$MEMRAY" run -q --native -o "$out.bin" "$script" "${script_args[@]}") ;;
    heaptrack) cmd=("$heaptrack_bin" -o "$out.ht" "${cmd[@]}") ;;
    esac
    local TIMEFORMAT='%R %U %S' times
    # bash's `time`: wall, and the user and sys time of every waited-for descendant (workers are reaped by python)
    times=$( { time "${cmd[@]}" > "$out.log" 2>&1; } 2>&1 ) ||
        { echo "bench: $m failed, see below" >&2; tail -5 "$out.log" >&2; exit 1; }
    rm -rf "$out.run" "$out.bin" "$out.ht"*
    echo "$times" | awk '{ print $1, $2 + $3 }'
}

summary() { # label, ratios one per line -> one line: median (range), geometric mean [95% interval]
    sort -g | awk -v label="$1" '
        { a[NR] = $1; l = log($1); s += l; ss += l * l }
        END {
            n = NR; med = (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
            m = s / n; sd = n > 1 ? sqrt((ss - n * m * m) / (n - 1)) : 0; se = sd / sqrt(n)
            printf "%-14s median %.3fx (range %.3f-%.3f), geomean %.3fx [95%%: %.3f-%.3f] over %d rounds\n",
                label, med, a[1], a[n], exp(m), exp(m - 2 * se), exp(m + 2 * se), n
        }'
}

echo "# torch_overhead: $rounds rounds, modes: ${modes[*]}, script args: ${script_args[*]:-(defaults)}"
declare -A wall cpu
for ((r = 1; r <= rounds; r++)); do
    order=$(printf '%s\n' "${modes[@]}" | shuf)
    line="round $r:"
    for m in $order; do
        [ "$m" = heaptrack ] && [ "$r" -gt 1 ] && continue
        res=$(run_mode "$m" "$r")
        read -r w c <<< "$res"
        wall[$m.$r]=$w
        cpu[$m.$r]=$c
        line+=" $m $(printf %.2f "$w")s/$(printf %.2f "$c")cpu"
    done
    echo "$line"
done
for m in "${modes[@]}"; do
    [ "$m" = plain ] && continue
    n=$rounds
    [ "$m" = heaptrack ] && n=1
    for ((r = 1; r <= n; r++)); do
        awk -v a="${wall[$m.$r]}" -v b="${wall[plain.$r]}" 'BEGIN { print a / b }'
    done | summary "$m wall"
    for ((r = 1; r <= n; r++)); do
        awk -v a="${cpu[$m.$r]}" -v b="${cpu[plain.$r]}" 'BEGIN { print a / b }'
    done | summary "$m cpu"
done
