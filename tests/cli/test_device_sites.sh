#!/bin/bash
# Integration: the device call sites (docs/cuda-interception.md "Device call sites") over the CUDA driver double. The GPU
# check's device loop (tests/targets/cuda_loop.c) runs under plateau run with PLATEAU_LIBCUDA = the double: `leak`
# keeps one 1 MiB cudaMalloc a step from main, `healthy` fills a cache of 30 slots, then reuses it.
#  - leak, judged by dev.allocated (--metric): the call-site section is the device sites', its first site the
#    leaking cudaMalloc's, named by the target's function (the preload's frames skipped), in text, JSON and HTML;
#  - leak, the whole report: the double's "device" memory is host memory (an anonymous mapping per allocation), so
#    the live heap leaks too and leads (nearer its limit): the host sites, as before;
#  - healthy: no leak, no device section, no host_sites in the JSON, with or without --metric.
# Usage: test_device_sites.sh PLATEAU TARGETS_DIR LIBCUDA_DOUBLE
set -u
P=$1 T=$2 double=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for m in leak healthy; do
    env PLATEAU_LIBCUDA="$double" PL_CUDA_DOUBLE=leak_exitcode:97 PLATEAU_CUPTI=0 \
        "$P" run -o "$tmp/$m" --no-report -- "$T/target_cuda_loop" "$m" 200 >"$tmp/$m.out" 2>&1 ||
        { cat "$tmp/$m.out"; fail "target_cuda_loop $m under plateau run exited $?"; }
done

# the leak by dev.allocated: the device sites
"$P" report --metric dev.allocated --json "$tmp/dev.json" --html "$tmp/dev.html" "$tmp/leak" >"$tmp/dev.txt" 2>&1 ||
    fail "report --metric dev.allocated on the leak exited $?"
head -1 "$tmp/dev.txt" | grep -q '^verdict: LEAK in pid [0-9]* (target_cuda_loop): +1.00 MiB/step of dev.allocated' ||
    { cat "$tmp/dev.txt"; fail "the leak is not a dev.allocated leak"; }
grep -Eq '^device call sites by growth of device memory taken from the driver \(pid [0-9]+, dev.allocated, since step [0-9]+\):$' "$tmp/dev.txt" ||
    { cat "$tmp/dev.txt"; fail "no device call-site section"; }
grep -q 'call sites by live-byte growth' "$tmp/dev.txt" && { cat "$tmp/dev.txt"; fail "the host sites shown for a device leak"; }
# the first site: +~100 MiB over the tail, at main of the target (no frame of the preload or of the double first)
sed -n '/^device call sites/,$p' "$tmp/dev.txt" | grep -A1 -m1 '^  1\. +' >"$tmp/first.txt"
grep -Eq '^  1\. \+(9[0-9]|10[0-9])(\.[0-9])? MiB \(live [0-9.]+ MiB\)$' "$tmp/first.txt" &&
    grep -Eq '^       at main\+0x[0-9a-f]+ \(target_cuda_loop\)$' "$tmp/first.txt" ||
    { cat "$tmp/dev.txt"; fail "the first device site is not the leaking cudaMalloc in main"; }
grep -Eq '^  100% of the device memory taken from the driver since step [0-9]+ was requested at main\+0x[0-9a-f]+ \(target_cuda_loop\)$' "$tmp/dev.txt" ||
    { cat "$tmp/dev.txt"; fail "no sentence naming the top device site"; }
python3 - "$tmp/dev.json" <<'EOF' || fail "the JSON's device sites"
import json, sys
p = json.load(open(sys.argv[1]))["run"]["processes"][0]
s = p["sites"]
assert s["memory"] == "device" and s["granularity"] == "segment" and s["metric"] == "dev.allocated", s
top = s["top"][0]
assert top["frames"][0].startswith("main+") and top["frames"][0].endswith("(target_cuda_loop)"), top
assert 0.9 * 100 * 2**20 <= top["growth_bytes"] <= 1.1 * 100 * 2**20, top
assert s["grew"] == 1 and s["growth_bytes"] == top["growth_bytes"], s
assert "host_sites" in p
EOF
grep -q 'Device call sites by growth of device memory taken from the driver' "$tmp/dev.html" ||
    fail "no device sites in the HTML"

# the whole report of the leak: the live heap leads (the double's memory is the host's): the host sites
"$P" report --json "$tmp/all.json" "$tmp/leak" >"$tmp/all.txt" 2>&1 || fail "report on the leak exited $?"
head -1 "$tmp/all.txt" | grep -q 'of heap.bytes' || { cat "$tmp/all.txt"; fail "the leak's whole report is not led by heap.bytes"; }
grep -q '^call sites by live-byte growth' "$tmp/all.txt" && ! grep -q 'device call sites' "$tmp/all.txt" ||
    { cat "$tmp/all.txt"; fail "a heap leak's report without its host sites"; }
grep -q '"host_sites"' "$tmp/all.json" && fail "host_sites in a heap leak's JSON"

# healthy: nothing of the device sites, with or without --metric
for opt in "" "--metric dev.allocated"; do
    # shellcheck disable=SC2086
    "$P" report $opt --json "$tmp/h.json" "$tmp/healthy" >"$tmp/h.txt" 2>&1 || fail "report $opt on healthy exited $?"
    head -1 "$tmp/h.txt" | grep -q '^verdict: no leak' || { cat "$tmp/h.txt"; fail "healthy $opt: not 'no leak'"; }
    grep -qi 'device call sites' "$tmp/h.txt" && fail "healthy $opt: a device section"
    grep -q '"host_sites"\|"memory": "device"' "$tmp/h.json" && fail "healthy $opt: device sites in the JSON"
done
echo "leak: $(head -1 "$tmp/dev.txt" | cut -c1-80) | $(tr -s ' ' <"$tmp/first.txt" | tr '\n' ' ')"
