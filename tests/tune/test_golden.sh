#!/bin/sh
# Goldens of `plateau tune` and `plateau replay`: the whole text and JSON outputs (stdout, stderr, exit status and
# the --json file) on the committed inputs: plateau traces (tests/fixtures/traces: frag.pltrace from
# `test_tune_gen frag`, workload.pltrace from `test_tune_gen workload expandable_segments:True,roundup_power2_divisions:4`),
# PyTorch memory snapshots (tests/fixtures/snapshots) and RMM logs (tests/fixtures/rmm). One golden file per case in
# tests/tune/golden/NAME.txt. Suite unit: no preload, runs under ASan too.
# usage: test_golden.sh PLATEAU FIXTURES_DIR GOLDEN_DIR WORKDIR
# PL_REGEN_GOLDEN=1 rewrites the goldens instead (tools/regen-tune-goldens.sh); review the diff before committing.
set -eu
plateau=$1 fx=$2 golden=$3 work=$4/tune-golden-$$
case $plateau in /*) ;; *) plateau=$(pwd)/$plateau ;; esac  # meson passes it relative to the build dir
rm -rf "$work"; mkdir -p "$work/in" "$work/out"
trap 'rm -rf "$work"' EXIT
# inputs under short relative names: file names are part of the outputs
cp -R "$fx/traces" "$fx/snapshots" "$fx/rmm" "$work/in/"
cd "$work/in"
mkdir run
cp traces/frag.pltrace run/123.0.pltrace
size=$(wc -c < traces/workload.pltrace)
head -c $((size - 50)) traces/workload.pltrace > traces/trunc.pltrace
echo 'not anything' > junk.bin

# case NAME ARGS...: run plateau ARGS; an argument "@json" becomes the path of the case's JSON file
case_() {
    name=$1; shift
    out="$work/out/$name.txt" json="$name.json"  # relative: the path is printed
    head=$(printf 'plateau'; for a in "$@"; do printf " '%s'" "$a"; done)
    n=$#
    for a in "$@"; do
        [ "$a" = @json ] && a=$json
        set -- "$@" "$a"
    done
    shift "$n"
    rc=0
    "$plateau" "$@" > "$work/stdout" 2> "$work/stderr" || rc=$?
    {
        printf '$ %s\n[exit %d]\n--- stdout\n' "$head" "$rc"; cat "$work/stdout"
        printf -- '--- stderr\n'; cat "$work/stderr"
        if [ -f "$json" ]; then printf -- '--- json\n'; cat "$json"; rm -f "$json"; fi
    } > "$out"
}

# --jobs 1 or 2: results do not depend on the thread count (the sim device's addresses are its own, docs/tune.md),
# and tune_workload, whose grid used to rank differently from run to run on 2 threads, runs on 2.
# plateau traces
case_ tune_frag tune traces/frag.pltrace --jobs 2 --json @json
case_ tune_frag_capacity tune traces/frag.pltrace --jobs 1 --capacity 1GiB --grid 'expandable_segments=False|True' --top 0
case_ tune_frag_top tune traces/frag.pltrace --jobs 1 --top 3
case_ tune_workload tune traces/workload.pltrace --jobs 2 --json @json
case_ tune_rundir tune run --jobs 1 --grid 'expandable_segments=False|True;max_split_size_mb=default|64'
case_ tune_trunc tune traces/trunc.pltrace --jobs 1 --grid 'expandable_segments=False|True' --json @json
case_ replay_frag replay traces/frag.pltrace --conf ''
case_ replay_frag_expandable_json replay traces/frag.pltrace --conf expandable_segments:True --json -
case_ replay_workload replay traces/workload.pltrace --conf ''
case_ replay_workload_recorded replay traces/workload.pltrace --conf expandable_segments:True,roundup_power2_divisions:4 --json @json
case_ replay_workload_gc replay traces/workload.pltrace --conf garbage_collection_threshold:0.6,max_split_size_mb:64 --capacity 400MiB --json -
case_ replay_trunc replay traces/trunc.pltrace --conf ''
# PyTorch memory snapshots
case_ tune_snapshot_frag tune snapshots/frag.pickle --jobs 1 --capacity 100MiB --json @json
# a recorded OOM: the capacity comes from the snapshot (reserved + device_free at the OOM), and the defaults fail there
case_ tune_snapshot_frag_oom tune snapshots/frag_oom.pickle --jobs 2 --grid 'expandable_segments=False|True' --json @json
case_ tune_snapshot_basic tune snapshots/basic.pickle --jobs 1 --json @json
case_ tune_snapshot_wrapped tune snapshots/wrapped.pickle --jobs 1 --grid 'expandable_segments=False|True'
case_ tune_snapshot_requested tune snapshots/requested_only.pickle --jobs 1 --grid 'roundup_power2_divisions=default|4'
case_ replay_snapshot_basic replay snapshots/basic.pickle --conf '' --json -
case_ replay_snapshot_basic_dev0 replay snapshots/basic.pickle --conf '' --device 0
case_ replay_snapshot_p2 replay snapshots/basic_p2.pickle --conf expandable_segments:True --json @json
case_ replay_snapshot_frag_oom replay snapshots/frag_oom.pickle --conf ''
# RMM logs
case_ tune_rmm_frag tune rmm/frag.csv --jobs 1 --capacity 100MiB --json @json
case_ replay_rmm_basic replay rmm/basic_crlf.csv --conf ''
case_ replay_rmm_basic_json replay rmm/basic.csv --conf roundup_power2_divisions:4 --json -
# errors
case_ error_junk tune junk.bin
case_ error_no_history tune snapshots/no_history.pickle
case_ error_grid tune traces/frag.pltrace --grid 'max_split_size_mbb=100'
case_ error_device tune snapshots/basic.pickle --device 7
case_ error_replay_conf replay traces/frag.pltrace --conf 'expandable_segments:Maybe'

if [ "${PL_REGEN_GOLDEN:-}" = 1 ]; then
    rm -f "$golden"/*.txt
    cp "$work"/out/*.txt "$golden"/
    echo "rewrote $(ls "$golden" | wc -l) goldens in $golden"
    exit 0
fi
status=0
for f in "$work"/out/*.txt; do
    g="$golden/$(basename "$f")"
    if [ ! -f "$g" ]; then echo "FAIL: no golden $g" >&2; status=1; continue; fi
    diff -u "$g" "$f" >&2 || { echo "FAIL: $(basename "$f") differs from its golden" >&2; status=1; }
done
for g in "$golden"/*.txt; do
    [ -f "$work/out/$(basename "$g")" ] || { echo "FAIL: golden $(basename "$g") has no case" >&2; status=1; }
done
[ $status = 0 ] && echo "ok: $(ls "$work"/out | wc -l) cases"
exit $status
