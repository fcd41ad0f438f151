#!/bin/sh
# plateau tune / replay end to end.
# usage: test_tune.sh synth PLATEAU GEN WORKDIR                 (suite unit: generated traces, no preload)
#        test_tune.sh record PLATEAU GEN WORKDIR PLATEAU_TRAIN  (suite integration: plateau run + plateau-train)
set -eu
mode=$1 plateau=$2 gen=$3 work=$4/tune-$mode-$$
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# json FILE EXPR: evaluate a Python expression over the parsed JSON document `d`
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

if [ "$mode" = synth ]; then
    "$gen" frag "" "$work/frag.pltrace"
    # tune ranks an expandable config first: the default runs out of memory at the recorded 100 MiB capacity
    "$plateau" tune "$work/frag.pltrace" --json "$work/t1.json" > "$work/t1.txt" || fail "tune exit $?"
    grep -q '^  PLATEAU_ALLOC_CONF=expandable_segments:True' "$work/t1.txt" || { cat "$work/t1.txt"; fail "winner"; }
    grep -q '^  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True' "$work/t1.txt" || fail "pytorch line"
    grep -q 'default settings run out of memory at event 45' "$work/t1.txt" || { cat "$work/t1.txt"; fail "explanation"; }
    [ "$(json "$work/t1.json" "d['configs'][0]['result']['oom']")" = False ] || fail "winner OOMs"
    [ "$(json "$work/t1.json" "d['baseline']['oom']")" = True ] || fail "baseline does not OOM"
    # deterministic: same JSON with another thread count
    "$plateau" tune "$work/frag.pltrace" --jobs 1 --json "$work/t2.json" > /dev/null || fail "tune --jobs 1"
    cmp -s "$work/t1.json" "$work/t2.json" || fail "tune results depend on the thread count"
    # --capacity: with room, nothing OOMs
    "$plateau" tune "$work/frag.pltrace" --capacity 1GiB --grid 'expandable_segments=False|True' \
        --json "$work/t3.json" > /dev/null || fail "tune --capacity"
    [ "$(json "$work/t3.json" "d['baseline']['oom']")" = False ] || fail "capacity ignored"
    # --capacity reads the one size grammar (common/units.h): 1G is 1 GiB, 1gb 10^9 bytes, 0 and 1.5G are no sizes
    "$plateau" tune "$work/frag.pltrace" --capacity 1G --grid 'expandable_segments=False|True' \
        --json "$work/t4.json" > /dev/null || fail "tune --capacity 1G"
    [ "$(json "$work/t4.json" "d['capacity_bytes']")" = 1073741824 ] || fail "tune --capacity 1G"
    "$plateau" replay "$work/frag.pltrace" --conf "" --capacity 1gb --json - > "$work/r0.json" || fail "replay 1gb"
    [ "$(json "$work/r0.json" "d['result']['capacity_bytes']")" = 1000000000 ] || fail "replay --capacity 1gb"
    for bad in 0 1.5G 1X; do
        if "$plateau" tune "$work/frag.pltrace" --capacity "$bad" > /dev/null 2> "$work/err"; then fail "tune $bad"; fi
        grep -q "is not a size" "$work/err" || fail "tune --capacity $bad: $(cat "$work/err")"
    done
    # replay: full stats, default OOMs at event 45, expandable does not
    "$plateau" replay "$work/frag.pltrace" --conf "" > "$work/r1.txt" || fail "replay exit"
    grep -q '^first_oom: event 45 of 47' "$work/r1.txt" || { cat "$work/r1.txt"; fail "replay OOM"; }
    "$plateau" replay "$work/frag.pltrace" --conf expandable_segments:True --json - > "$work/r2.json"
    [ "$(json "$work/r2.json" "d['result']['n_ooms']")" = 0 ] || fail "expandable OOMs"
    # round trip of an in-process recording (allocator hook -> writer), non-default config
    conf='max_split_size_mb:64,roundup_power2_divisions:4'
    set -- $("$gen" workload "$conf" "$work/wl.pltrace")
    "$plateau" replay "$work/wl.pltrace" --conf "$conf" --json - > "$work/wl.json"
    [ "$(json "$work/wl.json" "d['result']['peak_allocated_bytes']")" = "$1" ] || fail "peak allocated"
    [ "$(json "$work/wl.json" "d['result']['peak_reserved_bytes']")" = "$2" ] || fail "peak reserved"
    [ "$(json "$work/wl.json" "d['result']['n_device_alloc']")" = "$3" ] || fail "device allocs"
    # bad input: no device records, not a trace, truncated, bad arguments
    "$gen" nodev "" "$work/nodev.pltrace"
    if "$plateau" tune "$work/nodev.pltrace" > /dev/null 2> "$work/e1.txt"; then fail "nodev accepted"; fi
    grep -q 'no device allocation records' "$work/e1.txt" || fail "nodev message"
    grep -q 'plateau run' "$work/e1.txt" || fail "nodev message says what to record"
    echo garbage > "$work/junk.pltrace"
    if "$plateau" replay "$work/junk.pltrace" --conf "" > /dev/null 2> "$work/e2.txt"; then fail "junk accepted"; fi
    grep -q 'junk.pltrace' "$work/e2.txt" || fail "junk message"
    size=$(wc -c < "$work/wl.pltrace")
    head -c $((size - 50)) "$work/wl.pltrace" > "$work/trunc.pltrace"
    "$plateau" tune "$work/trunc.pltrace" --grid 'expandable_segments=False|True' > /dev/null 2> "$work/e3.txt" \
        || fail "truncated trace not replayed"
    grep -q 'warning:.*trunc.pltrace' "$work/e3.txt" || { cat "$work/e3.txt"; fail "truncation warning"; }
    if "$plateau" tune "$work/frag.pltrace" --grid 'max_split_size_mbb=100' > /dev/null 2> "$work/e4.txt"; then
        fail "bad grid accepted"; fi
    grep -q 'max_split_size_mbb' "$work/e4.txt" || fail "bad grid message"
    if "$plateau" replay "$work/frag.pltrace" > /dev/null 2>&1; then fail "replay without --conf"; fi
    echo "ok: synth"
    exit 0
fi

# record: plateau-train under plateau run with a known config, then replay under the same config
train=$5
for conf in "" "expandable_segments:True,roundup_power2_divisions:4"; do
    rm -rf "$work/run"
    PLATEAU_ALLOC_CONF="$conf" "$plateau" run -o "$work/run" --no-report -- "$train" --steps 6 --layers 2 \
        --channels 64 --variable-seq --threads 1 > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "run"; }
    "$plateau" replay "$work/run" --conf "$conf" --json - > "$work/rt.json" || fail "replay of the recorded run"
    for pair in "allocated_bytes_peak" "reserved_bytes_peak" "num_device_alloc" "num_device_free" "num_ooms"; do
        rec=$(json "$work/rt.json" "d['recorded']['$pair']")
        rep=$(json "$work/rt.json" "d['replay_at_recorded']['$pair']")
        [ "$rec" = "$rep" ] || fail "conf '$conf': $pair recorded $rec, replayed $rep"
    done
    [ "$(json "$work/rt.json" "d['result']['n_map_events'] == d['input']['n_map_records'] > 0")" = True ] \
        || fail "conf '$conf': device map calls differ"
    [ "$(json "$work/rt.json" "d['result']['peak_allocated_bytes'] == d['recorded']['allocated_bytes_peak'] > 0")" = True ] \
        || fail "conf '$conf': peak allocated not reproduced"
    "$plateau" tune "$work/run" --json "$work/tune.json" > "$work/tune.txt" || fail "tune of the recorded run"
    grep -q 'PLATEAU_ALLOC_CONF=' "$work/tune.txt" || fail "tune output"
done
echo "ok: record"
