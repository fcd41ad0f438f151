#!/bin/bash
# What the live verdict costs. The watcher is a separate process that only reads the trace files,
# so its cost to the traced program is the CPU it takes on a shared machine. Measured here, interleaved REPS times:
#   off:   plateau run --no-live -- PROGRAM                 (no watcher)
#   watch: the same, with `plateau watch --interval S DIR` running beside it from before the start to the end;
#          the watcher's own CPU time comes from wait4() on it.
# Two programs: storm (tests/targets/storm: 8 threads of malloc/free with every call recorded,
# PLATEAU_SAMPLE_BYTES=0: the heaviest trace stream the tracer writes, the worst case for a follower) and warmleak
# (tests/targets/warmleak: a step every ~2 ms with the default sampling, like a training loop).
# Prints per program: median wall of the traced run off / with the watcher, the median of the paired ratios, the
# watcher's CPU per run and per MiB of trace; then one poll over a finished run (plateau watch --once).
# Usage: bench/live_overhead.sh BUILD_DIR [REPS=5] [INTERVAL_S=0.25]
set -eu
B=${1:?BUILD_DIR}
REPS=${2:-5}
S=${3:-0.25}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$B" "$REPS" "$S" "$tmp" <<'PY'
import glob, os, statistics, subprocess, sys, time
B, reps, S, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
P = B + "/cli/plateau"
progs = {
    "storm": ([B + "/tests/targets/target_storm", "300000", "8"], {"PLATEAU_SAMPLE_BYTES": "0"}),
    "warmleak": ([B + "/tests/targets/target_warmleak", "30", "3000", "-", "-", "4096"], {}),
}
def one(name, mode, k):
    cmd, env = progs[name]
    d = f"{tmp}/{name}-{mode}-{k}"
    os.mkdir(d)
    w = None
    if mode == "watch":
        w = subprocess.Popen([P, "watch", "--interval", S, d], stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    subprocess.run([P, "run", "--no-live", "--no-report", "-o", d, "--"] + cmd, env=dict(os.environ, **env),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.monotonic() - t0
    cpu = 0.0
    if w:
        _, _, ru = os.wait4(w.pid, 0)  # watch ends by itself once run.status is written
        cpu = ru.ru_utime + ru.ru_stime
    mib = sum(os.path.getsize(f) for f in glob.glob(d + "/*.pltrace")) / 2**20
    return wall, cpu, mib, d
for name in progs:
    rows = {"off": [], "watch": []}
    for k in range(reps):
        for mode in ("off", "watch"):
            rows[mode].append(one(name, mode, k))
    off = [r[0] for r in rows["off"]]; on = [r[0] for r in rows["watch"]]
    pairs = [b / a for a, b in zip(off, on)]
    cpu = [r[1] for r in rows["watch"]]; mib = [r[2] for r in rows["watch"]]
    print(f"{name}: wall off {statistics.median(off):.2f} s, with watcher {statistics.median(on):.2f} s; "
          f"paired ratio median {statistics.median(pairs):.3f} (min {min(pairs):.3f}, max {max(pairs):.3f}); "
          f"watcher CPU {statistics.median(cpu):.3f} s per run for {statistics.median(mib):.1f} MiB "
          f"({1000 * sum(cpu) / sum(mib):.1f} ms/MiB; {100 * statistics.median(c / w for c, w in zip(cpu, on)):.2f} % of one core)")
    big = max(rows["off"], key=lambda r: r[2])[3]
    best = None
    for _ in range(3):
        p = subprocess.Popen([P, "watch", "--once", big], stdout=subprocess.DEVNULL)
        _, _, ru = os.wait4(p.pid, 0)
        c = ru.ru_utime + ru.ru_stime
        best = c if best is None else min(best, c)
        rss = ru.ru_maxrss / 1024
    mb = sum(os.path.getsize(f) for f in glob.glob(big + "/*.pltrace")) / 2**20
    print(f"  one poll over a finished {mb:.1f} MiB run: {best:.3f} s CPU (best of 3), watcher peak RSS {rss:.1f} MiB")
PY
