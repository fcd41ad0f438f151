#!/usr/bin/env python3
"""Write the PyTorch memory snapshot and RMM log fixtures of tests/fixtures/{snapshots,rmm} (docs/tune.md).

Only Python's own pickle module is used, no torch: the snapshots follow the schema torch/cuda/_memory_viz.py and
MemoryViz.js read (the dict torch.cuda.memory._snapshot() returns and _dump_snapshot() pickles): 'segments' (with
'blocks', 'frames', 'segment_pool_id' tuples ...), 'device_traces' (one list of entries a device: 'action', 'addr',
'size', 'stream', 'time_us', 'frames', 'user_metadata', 'compile_context'), 'allocator_settings'. A real snapshot
cannot be made here: recording needs a CUDA device (python3-torch is CPU-only on this machine).

The allocation histories come from a toy caching allocator below (sizes round to 512 B, freed blocks are reused
by size, segments of 20 MiB or the rounded size), so addresses are reused as in a real trace. Each fixture has a
sidecar NAME.json with what the C tests expect, computed here independently of plateau: the number of
allocations/frees/probes the sequence holds, frees of unknown addresses, and the peak allocated bytes
(sum of live requests rounded up to 512 B, probes that fit included) and peak requested bytes that a replay with
the default settings and ample capacity must report.

usage: tools/gen-snapshot-fixtures.py [OUT_ROOT]   (default: tests/fixtures next to this script's repo)
"""
import json
import os
import pickle
import random
import sys

MIB = 1 << 20
SEG = 20 * MIB
BASE = 0x7F3A00000000
STREAM = 0  # the default stream


def round512(n):
    return 512 if n < 512 else (n + 511) // 512 * 512


class ToyAllocator:
    """Bump allocation inside 20 MiB segments, blocks reused by exact rounded size: enough for realistic traces."""

    def __init__(self, device, t0=1700000000000000):
        self.device = device
        self.trace = []
        self.segments = []  # [addr, total, bump]
        self.cache = {}  # rounded size -> [addr]
        self.live = {}  # addr -> (requested, rounded, frames)
        self.time = t0
        self.frames = [
            [{'filename': 'train.py', 'line': 40 + i, 'name': 'forward'},
             {'filename': 'torch/nn/modules/module.py', 'line': 1501, 'name': '_call_impl'}] for i in range(4)]

    def _entry(self, action, addr, size, frames=None, **extra):
        self.time += 7
        e = {'action': action, 'addr': addr, 'size': size, 'stream': STREAM, 'time_us': self.time,
             'frames': frames if frames is not None else [], 'user_metadata': '', 'compile_context': 'N/A'}
        if addr is None:  # an oom entry has 'device_free' (free device bytes) where the others have 'addr'
            del e['addr']
        e.update(extra)
        self.trace.append(e)

    def alloc(self, size, k=0):
        r = round512(size)
        frames = self.frames[k % len(self.frames)]  # shared lists: pickle writes them once and BINGETs them
        if self.cache.get(r):
            addr = self.cache[r].pop()
        else:
            seg = next((s for s in self.segments if s[2] + r <= s[0] + s[1]), None)
            if seg is None:
                total = SEG if r <= SEG else (r + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)
                addr0 = BASE + sum(s[1] for s in self.segments) + len(self.segments) * 2 * MIB
                seg = [addr0, total, addr0]
                self.segments.append(seg)
                self._entry('segment_alloc', addr0, total, frames)
            addr = seg[2]
            seg[2] += r
        self.live[addr] = (size, r, frames)
        self._entry('alloc', addr, size, frames)
        return addr

    def free(self, addr, completed=True):
        size, r, frames = self.live.pop(addr)
        self._entry('free_requested', addr, size, frames)
        if completed:
            self._entry('free_completed', addr, size, frames)
        self.cache.setdefault(r, []).append(addr)

    def oom(self, size, device_free=3 * MIB):
        self._entry('oom', None, size, [], device_free=device_free)

    def snapshot_segments(self):
        out = []
        for addr0, total, _ in self.segments:
            blocks, used = [], 0
            for a in sorted(self.live):
                if addr0 <= a < addr0 + total:
                    req, r, frames = self.live[a]
                    blocks.append({'address': a, 'size': r, 'requested_size': req, 'state': 'active_allocated',
                                   'frames': frames})
                    used += r
            if total > used:
                blocks.append({'address': addr0 + used, 'size': total - used, 'requested_size': 0,
                               'state': 'inactive', 'frames': []})
            out.append({'device': self.device, 'address': addr0, 'total_size': total, 'stream': STREAM,
                        'segment_type': 'large' if total >= SEG else 'small', 'segment_pool_id': (0, 0),
                        'is_expandable': False, 'allocated_size': used, 'active_size': used,
                        'requested_size': sum(b['requested_size'] for b in blocks), 'frames': [],
                        'blocks': blocks})
        return out


def settings(conf='', expandable=False):
    return {'PYTORCH_CUDA_ALLOC_CONF': conf, 'max_split_size': -1, 'garbage_collection_threshold': 0.0,
            'expandable_segments': expandable, 'pinned_num_register_threads': 1,
            'release_lock_on_cudamalloc': False, 'pinned_use_host_register': False,
            'roundup_power2_divisions': {str(1 << i): 0 for i in range(6)}}


def expected(trace, frees_from=None):
    """What the replay sequence built from trace holds, modelled on the builder in tune/replay.c."""
    if frees_from is None:
        frees_from = 'free_completed' if any(e['action'] == 'free_completed' for e in trace) else 'free_requested'
    live = {}
    n_allocs = n_frees = n_probes = unmatched = n_map = 0
    cur_a = cur_r = peak_a = peak_r = 0
    for e in trace:
        a = e['action']
        if a == 'alloc':
            live[e['addr']] = e['size']
            n_allocs += 1
            cur_a += round512(e['size'])
            cur_r += e['size']
        elif a == frees_from:
            if e['addr'] in live:
                s = live.pop(e['addr'])
                n_frees += 1
                cur_a -= round512(s)
                cur_r -= s
            else:
                unmatched += 1
        elif a == 'oom':
            n_probes += 1
            peak_a = max(peak_a, cur_a + round512(e['size']))
            peak_r = max(peak_r, cur_r + e['size'])
        elif a == 'segment_map':
            n_map += 1
        peak_a = max(peak_a, cur_a)
        peak_r = max(peak_r, cur_r)
    return {'n_allocs': n_allocs, 'n_frees': n_frees, 'n_probes': n_probes, 'n_unmatched_frees': unmatched,
            'n_events': n_allocs + n_frees + n_probes, 'n_map_records': n_map,
            'peak_allocated_bytes': peak_a, 'peak_requested_bytes': peak_r}


def training(dev, steps, seed, delayed=True):
    """A training-like loop: parameters, then per step activations of varying size, a delayed free or two."""
    rnd = random.Random(seed)
    ta = ToyAllocator(dev)
    params = [ta.alloc(rnd.choice([4096, 65536, 3 * MIB + 100, 12345]), i) for i in range(6)]
    pending = []
    for step in range(steps):
        acts = [ta.alloc(rnd.randrange(1, 6 * MIB), k) for k in range(rnd.randrange(3, 9))]
        ta.alloc(333, 1)  # a small leak per step, < 512 B: rounded
        for a in pending:  # blocks used on another stream: their free completes a step later
            size, r, frames = ta.live[a]
            ta._entry('free_completed', a, size, frames)
            ta.live.pop(a)
            ta.cache.setdefault(r, []).append(a)
        pending = []
        for i, a in enumerate(reversed(acts)):
            if delayed and i == 0:
                size, r, frames = ta.live[a]
                ta._entry('free_requested', a, size, frames)
                pending.append(a)
            else:
                ta.free(a)
        if step == 2:
            ta.oom(40 * MIB)
            ta._entry('snapshot', 0, 0)
    return ta, params


def write_pickle(path, obj, protocol):
    with open(path, 'wb') as f:
        pickle.dump(obj, f, protocol=protocol)


def write_json(path, obj):
    with open(path, 'w') as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write('\n')


def rmm_lines(trace, crlf=False, thread=140573312345856):
    """The same history as an RMM logging_resource_adaptor log (allocate / free / allocate failure)."""
    out = ['Thread,Time,Action,Pointer,Size,Stream']
    live = {}
    for i, e in enumerate(trace):
        t = '14:03:%02d.%06d' % (i // 1000 % 60, i % 1000 * 997)
        a = e['action']
        if a == 'alloc':
            live[e['addr']] = e['size']
            out.append('%d,%s,allocate,0x%x,%d,0x0' % (thread, t, e['addr'], e['size']))
        elif a == 'free_completed' and e['addr'] in live:
            out.append('%d,%s,free,0x%x,%d,0x0' % (thread, t, e['addr'], live.pop(e['addr'])))
        elif a == 'oom':
            out.append('%d,%s,allocate failure,(nil),%d,0x0' % (thread, t, e['size']))
    end = '\r\n' if crlf else '\n'
    return end.join(out) + end


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, '..', 'tests', 'fixtures')
    snap_dir, rmm_dir = os.path.join(root, 'snapshots'), os.path.join(root, 'rmm')
    os.makedirs(snap_dir, exist_ok=True)
    os.makedirs(rmm_dir, exist_ok=True)

    # basic: two devices; device 1 has the most allocations (the reader must pick it)
    d0, _ = training(0, 1, seed=1, delayed=False)
    d1, _ = training(1, 6, seed=2)
    snap = {'segments': d0.snapshot_segments() + d1.snapshot_segments(), 'device_traces': [d0.trace, d1.trace],
            'allocator_settings': settings('garbage_collection_threshold:0.0'), 'external_annotations': []}
    exp = expected(d1.trace)
    exp.update({'device': 1, 'n_devices': 2, 'reserved_bytes': sum(s['total_size'] for s in d1.snapshot_segments()),
                'n_segments': len(d1.segments), 'alloc_conf': 'garbage_collection_threshold:0.0',
                'n_segment_alloc': sum(e['action'] == 'segment_alloc' for e in d1.trace),
                'device0': expected(d0.trace)})
    for proto in (2, 3, 4, 5):
        name = 'basic.pickle' if proto == 4 else 'basic_p%d.pickle' % proto
        write_pickle(os.path.join(snap_dir, name), snap, proto)
    write_json(os.path.join(snap_dir, 'basic.json'), exp)
    with open(os.path.join(rmm_dir, 'basic.csv'), 'w', newline='') as f:
        f.write(rmm_lines(d1.trace))
    with open(os.path.join(rmm_dir, 'basic_crlf.csv'), 'w', newline='') as f:
        f.write('\ufeff' + rmm_lines(d1.trace, crlf=True))
    rexp = expected(d1.trace)  # the RMM log has the same sequence (frees at free_completed)
    write_json(os.path.join(rmm_dir, 'basic.json'), rexp)

    # wrapped: the ring buffer kept only the last entries (frees of blocks allocated before them)
    wrapped = d1.trace[len(d1.trace) // 3:]
    write_pickle(os.path.join(snap_dir, 'wrapped.pickle'),
                 {'segments': d1.snapshot_segments(), 'device_traces': [wrapped], 'allocator_settings': settings()}, 4)
    write_json(os.path.join(snap_dir, 'wrapped.json'), expected(wrapped))

    # requested_only: an older PyTorch without free_completed: frees are free_requested
    req = [e for e in d1.trace if e['action'] != 'free_completed']
    write_pickle(os.path.join(snap_dir, 'requested_only.pickle'), {'device_traces': [req]}, 4)
    write_json(os.path.join(snap_dir, 'requested_only.json'), expected(req, 'free_requested'))

    # frag: the crafted fragmentation sequence of tests/reports (docs/tune.md): at 100 MiB, 25 blocks of 4 MiB fill
    # five 20 MiB segments, all but the middle block of each are freed, then 12 MiB is asked. The default settings
    # run out of memory (every segment is pinned), expandable segments fit it.
    fa = ToyAllocator(0)
    blocks = [fa.alloc(4 * MIB) for _ in range(25)]
    for i, a in enumerate(blocks):
        if i % 5 != 2:
            fa.free(a)
    big = fa.alloc(12 * MIB)
    fa.free(big)
    write_pickle(os.path.join(snap_dir, 'frag.pickle'),
                 {'segments': fa.snapshot_segments(), 'device_traces': [fa.trace], 'allocator_settings': settings()},
                 4)
    write_json(os.path.join(snap_dir, 'frag.json'), expected(fa.trace))
    with open(os.path.join(rmm_dir, 'frag.csv'), 'w', newline='') as f:
        f.write(rmm_lines(fa.trace))

    # frag_oom: the same run on a device that had 2 MiB free once the five segments were reserved: the 12 MiB
    # request failed (an oom entry with device_free). The capacity it had, reserved + device_free at the OOM, is
    # 102 MiB: replayed there, the defaults fail on that request and expandable segments fit it.
    fo = ToyAllocator(0)
    blocks = [fo.alloc(4 * MIB) for _ in range(25)]
    for i, a in enumerate(blocks):
        if i % 5 != 2:
            fo.free(a)
    fo.oom(12 * MIB, device_free=2 * MIB)
    write_pickle(os.path.join(snap_dir, 'frag_oom.pickle'),
                 {'segments': fo.snapshot_segments(), 'device_traces': [fo.trace], 'allocator_settings': settings()},
                 4)
    exp = expected(fo.trace)
    exp.update({'reserved_at_oom_bytes': sum(s[1] for s in fo.segments), 'device_free_at_oom_bytes': 2 * MIB,
                'capacity_bytes': sum(s[1] for s in fo.segments) + 2 * MIB})
    write_json(os.path.join(snap_dir, 'frag_oom.json'), exp)

    # no_history: segments only (recorded without _record_memory_history)
    write_pickle(os.path.join(snap_dir, 'no_history.pickle'),
                 {'segments': d1.snapshot_segments(), 'device_traces': [[]], 'allocator_settings': settings()}, 4)

    # opcodes: every value type the reader accepts, for the pickle unit tests (content asserted in
    # tests/reports/test_pickle.c); a list that contains itself, shared values, big and negative ints
    shared = {'k': 'v'}
    selfref = [1]
    selfref.append(selfref)
    rtuple = ([],)  # a tuple reached through itself: Python writes POP (protocol 2+) and a memo get
    rtuple[0].append(rtuple)
    rtuple5 = ([], 2, 3, 4, 5)  # the same for a MARK-built tuple: POP_MARK
    rtuple5[0].append(rtuple5)
    obj = {'none': None, 't': True, 'f': False, 'i8': 200, 'i16': 60000, 'i32': -5, 'i32b': 2 ** 31 - 1,
           'long': 0x7F3A12345678, 'neg': -(2 ** 40), 'max': 2 ** 63 - 1, 'min': -(2 ** 63), 'zero': 0,
           'float': 1.5, 'str': 'h\u00e9llo', 'empty': '', 'long_str': 'x' * 300, 'tuple0': (), 'tuple1': (1,),
           'tuple2': (1, 2),
           'tuple3': (1, 2, 3), 'tuple5': (1, 2, 3, 4, 5), 'list': list(range(2500)), 'nested': [[[]]],
           'shared': [shared, shared], 'selfref': selfref,
           'rtuple': rtuple, 'rtuple5': rtuple5, 'dict': {i: i * i for i in range(1500)}}
    for proto in (2, 3, 4, 5):
        o = dict(obj)
        if proto >= 3:  # protocol 2 pickles bytes through _codecs.encode (a REDUCE): refused, so not here
            o.update({'bytes': b'\x00\x01\x02', 'long_bytes': b'y' * 300})
        if proto >= 5:  # before protocol 5 a bytearray is a REDUCE too
            o['bytearray'] = bytearray(b'ba')
        write_pickle(os.path.join(snap_dir, 'opcodes_p%d.pickle' % proto), o, proto)


if __name__ == '__main__':
    main()
