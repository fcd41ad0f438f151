#!/bin/bash
# Integration (issue 27 item 2): DataLoader workers that read their parent's list of Python objects on a real
# PyTorch script (tests/targets/torch_cow.py, unmarked: steps come from the optimizer), under plateau run.
# Healthy: the workers' PSS climbs while their RSS and live heap stay flat: the report names copy-on-access with its
# ceiling, the verdict is `no leak`, no worker is a leak. --leak: each worker keeps 256 KiB per batch: the run is a
# LEAK of the workers' pool on the trainer's steps, never of the trainer, whether or not period detection finds a
# worker's loop. Each variant REPEAT times (default 1), every run the same headline.
# ~40 s a run on an idle 2-core machine.
# Usage: test_cow.sh PLATEAU SCRIPT [REPEAT]
set -u
P=$1 script=$2 repeat=${3:-1}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
heads=()
"$py" -c 'import torch' 2>/dev/null || { echo "skip: $py cannot import torch"; exit 77; }

for k in $(seq 1 "$repeat"); do
    d=$tmp/ok$k
    "$P" run -o "$d" --no-report -- "$py" "$script" >"$d.out" 2>&1 || { cat "$d.out"; fail "healthy run $k failed"; }
    "$P" report "$d" --json "$d.json" >"$d.txt" 2>"$d.err" || fail "report of healthy run $k exited $?"
    head -1 "$d.txt" | grep -q '^verdict: no leak' || { cat "$d.txt"; fail "healthy run $k: not 'no leak'"; }
    grep -Eq '^copy-on-access in 2 forked workers \(pids [0-9]+\.\.[0-9]+\): PSS \+[0-9.]+ MiB in all while their RSS and live heap stay flat, ceiling [0-9.]+ [MG]iB in all; not a leak' "$d.txt" ||
        { cat "$d.txt"; fail "healthy run $k: copy-on-access not named with its ceiling"; }
    "$py" - "$d.json" <<'PY' || fail "healthy run $k: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
cow = [p for p in d["processes"]
       if p["role"] == "worker" and any(f["code"] == "copy-on-access" for f in p.get("diagnosis", []))]
assert len(cow) == 2, [(p["pid"], p["role"], [f["code"] for f in p.get("diagnosis", [])]) for p in d["processes"]]
for p in cow:
    c = p["verdict"]["copy_on_access"]
    assert 8 << 20 <= c["pss_rise_bytes"] < c["ceiling_bytes"], c
assert not any(p["verdict"]["kind"] == "leak" for p in d["processes"]), "a process leaks"
PY
    echo "healthy $k: $(head -1 "$d.txt") | $(grep '^copy-on-access' "$d.txt" | cut -c1-120)"

    d=$tmp/leak$k
    "$P" run -o "$d" --no-report -- "$py" "$script" --leak >"$d.out" 2>&1 || { cat "$d.out"; fail "leak run $k failed"; }
    "$P" report "$d" >"$d.txt" 2>"$d.err" || fail "report of leak run $k exited $?"
    # the workers leak, never the trainer: named as their pool, on the trainer's steps (a worker whose loop period
    # detection found is still a member of the pool, tests/cli/test_cow_roles.sh)
    "$py" - "$d.txt" <<'PY' || { cat "$d.txt"; fail "leak run $k: the workers' pool is not the verdict"; }
import re, sys
txt = open(sys.argv[1]).read()
m = re.match(r"verdict: LEAK in pid (\d+) \(pool of 2 workers\): \+25\d KiB/step of heap\.bytes", txt)
assert m, txt.splitlines()[0]
rows = re.findall(r"^ +(\d+) +(\d+) +- .*torch_cow\.py", txt, re.M)
pids = {p for p, _ in rows}
trainer = [p for p, pp in rows if pp not in pids]
assert len(trainer) == 1 and m.group(1) == trainer[0], (m.groups(), rows)
assert not re.search(r"^ +%s +\d+ +- +\d+ +\S+ +\S+ +leak " % trainer[0], txt, re.M), "the trainer leaks"
PY
    heads+=("$(head -1 "$d.txt" | sed -E 's/^(verdict: [^(0-9]*)[0-9]+ (\([^)]*\)).*/\1P \2/')") # who, not how fast
    echo "leak $k: $(head -1 "$d.txt")"
done
for h in "${heads[@]}"; do [ "$h" = "${heads[0]}" ] || fail "leak runs read '${heads[0]}' and '$h'"; done
