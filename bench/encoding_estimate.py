#!/usr/bin/env python3
"""encoding_estimate: how small a tighter record encoding would make a trace's growing record kinds (bench/RESULTS.md,
"Trace bytes per hour"). An estimate, not an encoder: it reads `plateau-trace-dump TRACE` text on stdin or from the
file named, and sizes each host_alloc, host_free, heap, rss and step record as one byte of type and one of length,
the time as a zigzag varint delta from the previous record, addresses, totals and steps as zigzag varint deltas from
the previous record of the same kind, other fields as varints, NA as one byte; deltas restart every RESET records
(environment, default 15: about one chunk of 250 ms) as they would at each chunk.
    build/tests/tracer/plateau-trace-dump TRACE > dump.txt; RESET=15 python3 bench/encoding_estimate.py dump.txt
"""
import collections
import os
import sys

def vlen(v):
    n = 1
    while v >= 128: v >>= 7; n += 1
    return n
def zz(d): return (d << 1) if d >= 0 else ((-d << 1) - 1)
NA = 18446744073709551615
cur = collections.Counter(); new = collections.Counter(); cnt = collections.Counter()
sizes = {'host_alloc': 48, 'host_free': 24, 'heap': 76, 'rss': 76, 'step': 24}
prev_t = 0; prev = {}
RESET = int(os.environ.get('RESET', '15')); nrec = 0
for line in (open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin):
    parts = line.split()
    if len(parts) < 2 or not parts[0].isdigit(): continue
    t = int(parts[0]); kind = parts[1]
    if kind not in sizes: continue
    fields = []
    for kv in parts[2:]:
        k, _, v = kv.partition('=')
        v = int(v, 16) if v.startswith('0x') else int(v)
        fields.append((k, v))
    nrec += 1
    if RESET and nrec % RESET == 0: prev_t = 0; prev = {}
    b = 2 + vlen(zz(t - prev_t)); prev_t = t
    p = prev.get(kind, {})
    for k, v in fields:
        if v == NA: b += 1
        elif k in ('addr', 'live_bytes', 'live_count', 'n_alloc', 'n_free', 'anon', 'file', 'shmem', 'step'):
            b += vlen(zz(v - p.get(k, 0)))
        else: b += vlen(v)
    if kind == 'heap': b += 2   # fields the dump does not print (mmap count, alloc_bytes): 2 more bytes
    if kind == 'rss': b += 2    # device_used, device_total: NA
    prev[kind] = dict(fields)
    cur[kind] += sizes[kind]; new[kind] += b; cnt[kind] += 1
tc = sum(cur.values()); tn = sum(new.values())
for k in sizes:
    print(f"{k:11s} {cnt[k]:8d} records {cur[k]/max(cnt[k],1):5.1f} -> {new[k]/max(cnt[k],1):5.1f} B/record")
print(f"these kinds: {tc} -> {tn} bytes ({tn/tc:.2f}x)")
