#!/bin/bash
# ab-outputs: every output of two plateau binaries on the same recorded runs, byte for byte: what a restructuring
# must leave unchanged (the reports wing's redesign, docs/ARCHITECTURE.md).
#
#   tools/ab-outputs.sh record BUILD DIR     record the runs into DIR with BUILD's plateau (C targets, plateau-train
#                                            with and without a leak, the CUDA driver double, Python retention
#                                            scripts when torch imports) and copy the committed fixture traces
#   tools/ab-outputs.sh compare DIR A B OUT  run plateau A and B on each run of DIR: `report` with every export
#                                            (JSON, HTML, CSV, trace events, PyTorch snapshot) and --ascii, `watch
#                                            --once --prometheus`, `tune --jobs 1 --json`; outputs under OUT/a, OUT/b;
#                                            one line per file that differs; exit 1 when any does
#
# A is usually main's binary built in a worktree (git worktree add /tmp/pl-old main; meson setup /tmp/pl-old/build
# && ninja -C /tmp/pl-old/build cli/plateau), B this tree's. The Prometheus file's update time is left out of the
# comparison (it is the time of the poll), and so are tune's timings.
set -u
cmd=${1:-}
case "$cmd" in
record)
    B=${2:?usage: ab-outputs.sh record BUILD DIR}
    D=${3:?usage: ab-outputs.sh record BUILD DIR}
    B=$(cd "$B" && pwd)
    P=$B/cli/plateau
    T=$B/tests/targets
    src=$(cd "$(dirname "$0")/.." && pwd)
    mkdir -p "$D"
    export OMP_WAIT_POLICY=passive
    rec() {
        local n=$1
        shift
        "$P" run --no-report -o "$D/$n" -- "$@" >/dev/null 2>&1 || echo "ab-outputs: $n exited $?"
    }
    rec marks "$T/target_marks" 12
    rec leak_static "$T/target_leak_static"
    rec leak_cxx "$T/target_leak_cxx"
    rec warmleak "$T/target_warmleak"
    rec threads "$T/target_threads"
    rec forkexec "$T/target_forkexec"
    double=$B/tests/cuda_double/libcuda.so.1
    [ -e "$double" ] && PLATEAU_LIBCUDA=$double rec cuda "$T/target_cuda" 40
    rec train "$B/training/plateau-train" --steps 60
    rec train_leak "$B/training/plateau-train" --steps 80 --leak graph --leak-start 20
    # no step records: the steps come from period detection (a whole trace, as plateau run writes it without steps)
    sed 's/^    step = ctypes.CDLL(None).plateau_step$/    step = lambda: None/' "$src/tests/reports/period_loop.py" \
        >"$D/unmarked_loop.py"
    PLATEAU_TRACE_FULL=1 rec unmarked_loop /usr/bin/python3 "$D/unmarked_loop.py" 60 4000
    rm -f "$D/unmarked_loop.py"
    if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        for s in leak_total_loss leak_list_append control_lru leak_self_history; do
            PLATEAU_CENSUS_BUDGET=0.5 rec "py_$s" /usr/bin/python3 "$src/tests/python/retention/$s.py"
        done
    fi
    cp "$src"/tests/fixtures/traces/*.pltrace "$D/"
    ls "$D"
    ;;
compare)
    D=${2:?usage: ab-outputs.sh compare DIR A B OUT}
    A=$(realpath "${3:?}")
    Bp=$(realpath "${4:?}")
    O=${5:?usage: ab-outputs.sh compare DIR A B OUT}
    rm -rf "$O"
    mkdir -p "$O/a" "$O/b"
    O=$(cd "$O" && pwd)
    D=$(cd "$D" && pwd)
    bad=0
    for r in "$D"/*; do
        n=$(basename "$r")
        for side in a b; do
            P=$A
            [ $side = b ] && P=$Bp
            (
                cd "$O/$side" || exit 1
                "$P" report "$r" --json "$n.json" --html "$n.html" --csv "$n.csv" --trace-events "$n.te.json" \
                    --torch-snapshot "$n.pickle" >"$n.txt" 2>"$n.err"
                echo "rc $?" >>"$n.txt"
                "$P" report "$r" --ascii >"$n.ascii.txt" 2>&1
                if [ -d "$r" ]; then
                    "$P" watch --once --prometheus "$n.prom" "$r" >"$n.watch.txt" 2>&1
                    echo "rc $?" >>"$n.watch.txt"
                    [ -f "$n.prom" ] && sed -i '/last_update_timestamp/d' "$n.prom"
                fi
                "$P" tune "$r" --jobs 1 --json "$n.tune.json" >"$n.tune.txt" 2>&1
                echo "rc $?" >>"$n.tune.txt"
                [ -f "$n.tune.json" ] && sed -i '/"seconds\|_ms"\|elapsed/d' "$n.tune.json"
            )
        done
    done
    n_files=0
    for f in "$O"/a/*; do
        n_files=$((n_files + 1))
        cmp -s "$f" "$O/b/$(basename "$f")" || { echo "differs: $(basename "$f")"; bad=1; }
    done
    [ "$(ls "$O/a" | wc -l)" = "$(ls "$O/b" | wc -l)" ] || { echo "differs: the files written"; bad=1; }
    echo "ab-outputs: $n_files files compared, $([ $bad = 0 ] && echo "all identical" || echo "some differ")"
    exit $bad
    ;;
*)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
