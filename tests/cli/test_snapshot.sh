#!/bin/sh
# plateau tune / replay on other tools' recordings: PyTorch memory snapshot pickles and RMM CSV logs
# (tests/fixtures/{snapshots,rmm}, tools/gen-snapshot-fixtures.py). Suite unit: no preload, runs under ASan too.
# usage: test_snapshot.sh PLATEAU FIXTURES_DIR WORKDIR
set -eu
plateau=$1 fx=$2 work=$3/snapshot-$$
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# the fragmentation snapshot: the defaults run out of memory at 100 MiB, an expandable config is ranked first
for f in "$fx/snapshots/frag.pickle" "$fx/rmm/frag.csv"; do
    "$plateau" tune "$f" --capacity 100MiB --json "$work/t.json" > "$work/t.txt" || fail "tune $f: exit $?"
    grep -q '^  PLATEAU_ALLOC_CONF=expandable_segments:True' "$work/t.txt" || { cat "$work/t.txt"; fail "winner $f"; }
    grep -q 'default settings run out of memory at event 45' "$work/t.txt" || fail "explanation $f"
    grep -q '^format: ' "$work/t.txt" || fail "no format line for $f"
    [ "$(json "$work/t.json" "d['baseline']['oom']")" = True ] || fail "baseline does not OOM ($f)"
    [ "$(json "$work/t.json" "d['configs'][0]['result']['oom']")" = False ] || fail "winner OOMs ($f)"
done
grep -q 'format: RMM logging_resource_adaptor log: 47 calls' "$work/t.txt" || { cat "$work/t.txt"; fail "rmm summary"; }

# replay: the peak allocated the generator computed (sidecar JSON), as JSON on stdout (the summary goes to stderr)
want=$(json "$fx/snapshots/basic.json" "d['peak_allocated_bytes']")
"$plateau" replay "$fx/snapshots/basic.pickle" --conf "" --json - > "$work/r.json" 2> "$work/r.err" || fail "replay"
[ "$(json "$work/r.json" "d['result']['peak_allocated_bytes']")" = "$want" ] || fail "peak allocated"
[ "$(json "$work/r.json" "d['input']['device']")" = 1 ] || fail "device choice"
grep -q 'recorded with: PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.0' "$work/r.err" || fail "recorded conf"
"$plateau" replay "$fx/snapshots/basic.pickle" --conf "" --device 0 --json - > "$work/r0.json" 2>/dev/null
[ "$(json "$work/r0.json" "d['result']['peak_allocated_bytes']")" = \
  "$(json "$fx/snapshots/basic.json" "d['device0']['peak_allocated_bytes']")" ] || fail "--device 0"
"$plateau" replay "$fx/rmm/basic_crlf.csv" --conf "" > "$work/r.txt" || fail "replay rmm"
grep -q "^peak_allocated_bytes: $(json "$fx/rmm/basic.json" "d['peak_allocated_bytes']") " "$work/r.txt" \
    || { cat "$work/r.txt"; fail "rmm peak allocated"; }
"$plateau" tune "$fx/snapshots/wrapped.pickle" --grid 'expandable_segments=False|True' > "$work/w.txt" \
    || fail "tune wrapped"
grep -q 'ring buffer' "$work/w.txt" || fail "wrapped: no ring buffer note"

# bad input: a clear error naming the file and the problem, exit status 1 (2 for bad arguments)
expect_err() { # FILE NEEDLE [ARGS...]
    f=$1 needle=$2; shift 2
    if "$plateau" tune "$f" "$@" > /dev/null 2> "$work/e.txt"; then fail "$f accepted"; fi
    grep -q "$needle" "$work/e.txt" || { cat "$work/e.txt"; fail "message for $f: want '$needle'"; }
    grep -q "$(basename "$f")" "$work/e.txt" || fail "message for $f does not name it"
}
expect_err "$fx/snapshots/no_history.pickle" '_record_memory_history'
head -c 500 "$fx/snapshots/basic_p2.pickle" > "$work/cut.pickle"
expect_err "$work/cut.pickle" 'not a readable PyTorch memory snapshot: offset'
python3 -c 'import pickle,os,sys; open(sys.argv[1],"wb").write(pickle.dumps({"device_traces":[[os.system]]}, 4))' \
    "$work/evil.pickle"
expect_err "$work/evil.pickle" 'STACK_GLOBAL (0x93) refused'
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,t,allocate,0x10,12,0x0\n1,t,alloc,0x20,12,0x0\n' > "$work/bad.csv"
expect_err "$work/bad.csv" 'line 3, column 5'
echo 'not anything' > "$work/junk.bin"
expect_err "$work/junk.bin" 'nor an RMM log'
expect_err "$fx/snapshots/basic.pickle" 'no device 7' --device 7
if "$plateau" tune "$fx/snapshots/basic.pickle" --device x > /dev/null 2>&1; then fail "--device x accepted"; fi
echo "ok"
