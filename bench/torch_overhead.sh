#!/usr/bin/env bash
# The tracer's cost on an ordinary PyTorch script (bench/torch_realistic.py: DataLoader workers, validation
# workers that come and go, AdamW, LR warmup, clipping), against the same script untraced, and the peers on the
# same script in the same run. Modes run in a shuffled order each round, so the machine's drift (1.5x over
# minutes here) falls on every mode alike; the ratio reported is the median over rounds of each round's
# traced/plain ratio, with the range.
#   bench/torch_overhead.sh [ROUNDS=5] [-- SCRIPT ARGS...]
# Env: BUILD (default build), PY (default /usr/bin/python3: Debian's, with torch), MEMRAY (a memray executable;
# default: none, skipped), HEAPTRACK (a heaptrack executable; default: none, skipped). heaptrack is 10x+ slower
# on this script, so it runs in the first round only (its ratio is that one round's).
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
[ -n "${MEMRAY:-}" ] && modes+=(memray memray-native)
heaptrack_bin=${HEAPTRACK:-}
[ -n "$heaptrack_bin" ] && modes+=(heaptrack)

run_mode() { # mode round -> prints wall seconds
    local m=$1 r=$2 out="$tmp/$1.$2"
    local cmd=("$PY" "$script" "${script_args[@]}")
    case $m in
    plain) ;;
    plateau) cmd=("$plateau" run --no-report -o "$out.run" -- "${cmd[@]}") ;;
    plateau-nopss) cmd=(env PLATEAU_PSS=0 "$plateau" run --no-report -o "$out.run" -- "${cmd[@]}") ;;
    memray) cmd=("$MEMRAY" run -q -o "$out.bin" "$script" "${script_args[@]}") ;;
    memray-native) cmd=("$MEMRAY" run -q --native -o "$out.bin" "$script" "${script_args[@]}") ;;
    heaptrack) cmd=("$heaptrack_bin" -o "$out.ht" "${cmd[@]}") ;;
    esac
    local t0 t1
    t0=$(date +%s.%N)
    "${cmd[@]}" > "$out.log" 2>&1 || { echo "bench: $m failed, see below" >&2; tail -5 "$out.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    rm -rf "$out.run" "$out.bin" "$out.ht"*
    awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}

echo "# torch_overhead: $rounds rounds, modes: ${modes[*]}, script args: ${script_args[*]:-(defaults)}"
declare -A wall
for ((r = 1; r <= rounds; r++)); do
    order=$(printf '%s\n' "${modes[@]}" | shuf)
    line="round $r:"
    for m in $order; do
        [ "$m" = heaptrack ] && [ "$r" -gt 1 ] && continue
        wall[$m.$r]=$(run_mode "$m" "$r")
        line+=" $m $(printf %.2f "${wall[$m.$r]}")s"
    done
    echo "$line"
done
for m in "${modes[@]}"; do
    [ "$m" = plain ] && continue
    n=$rounds
    [ "$m" = heaptrack ] && n=1
    ratios=$(for ((r = 1; r <= n; r++)); do
        awk -v a="${wall[$m.$r]}" -v b="${wall[plain.$r]}" 'BEGIN { print a / b }'
    done | sort -g)
    med=$(echo "$ratios" | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
    printf '%-14s median %.3fx of plain (range %.3f-%.3f over %d rounds)\n' "$m" "$med" \
        "$(echo "$ratios" | head -1)" "$(echo "$ratios" | tail -1)" "$n"
done
