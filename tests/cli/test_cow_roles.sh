#!/bin/bash
# Unit (recorded traces, no preload): the workers of one DataLoader that keep memory are judged as one pool, whatever
# period detection makes of their loops. Two runs of tests/targets/torch_cow.py --leak (2 persistent workers, each
# keeping 256 KiB per batch it makes), recorded once under `plateau run` and committed in tests/fixtures/runs/:
#  - cow_leak_timed: neither worker's loop was recognised, their live heaps are 1 s time buckets;
#  - cow_leak_looped: period detection found both workers' loops (steps auto-detected), their live heaps are by step.
# Both read the same headline, the pool of 2 workers on the trainer's steps; the trainer never leaks, and the
# workers whose loops were found stay workers (members of the pool), not main processes.
# usage: test_cow_roles.sh PLATEAU FIXTURES_DIR
set -u
P=$1 fx=$2
tmp=$(mktemp -d /tmp/pl-test-cow-roles-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
heads=()
for shape in timed looped; do
    d=$tmp/$shape
    mkdir "$d"
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$fx/runs/cow_leak_$shape.tar.xz" "$d" || fail "cannot unpack cow_leak_$shape"
    "$P" report "$d" --json "$d.json" >"$d.txt" 2>"$d.err" || { cat "$d.err"; fail "$shape: report exited $?"; }
    echo "$shape: $(head -1 "$d.txt")"
    n_auto=$(grep -c '^pid [0-9]*: steps auto-detected' "$d.txt")
    if [ "$shape" = looped ]; then [ "$n_auto" = 2 ] || fail "looped: $n_auto workers with auto-detected steps, not 2"
    else [ "$n_auto" = 0 ] || fail "timed: $n_auto workers with auto-detected steps"; fi
    python3 - "$d.json" <<'PY' || { cat "$d.txt"; fail "$shape: roles"; }
import json, sys
d = json.load(open(sys.argv[1]))
procs = d["processes"]
main = [p for p in procs if p["role"] == "main"]
workers = [p for p in procs if p["role"] == "worker"]
pools = [p for p in procs if p["role"] == "pool"]
assert len(main) == 1 and main[0]["verdict"]["kind"] != "leak", [(p["pid"], p["role"]) for p in procs]
assert len(workers) == 2, [(p["pid"], p["role"]) for p in procs]
assert len(pools) == 1 and pools[0]["pool_workers"] == 2 and pools[0]["pid"] == main[0]["pid"], pools
assert pools[0]["verdict"]["kind"] == "leak", pools[0]["verdict"]
v = d["verdict"]
assert v["kind"] == "leak" and v["pid"] == main[0]["pid"] and v["leaking"] == 1, v
PY
    heads+=("$(head -1 "$d.txt" | sed -E 's/^verdict: LEAK in pid [0-9]+ /verdict: LEAK in pid P /')")
done
want='verdict: LEAK in pid P (pool of 2 workers): +256 KiB/step of heap.bytes'
[ "${heads[0]}" = "${heads[1]}" ] || fail "the shapes read '${heads[0]}' and '${heads[1]}'"
case "${heads[0]}" in "$want"*) ;; *) fail "headline '${heads[0]}', want '$want...'" ;; esac
echo "ok: both shapes read '${heads[0]}'"
