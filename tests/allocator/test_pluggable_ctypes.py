#!/usr/bin/env python3
"""tests/allocator/test_pluggable_ctypes.py: the ctypes recipe of docs/cuda-backend.md, run against the built
libplateau_alloc.so over the CUDA driver test double ($PLATEAU_LIBCUDA). Checks that the documented Stats layout
matches pl_alloc_stats_t field by field (values the allocator must report for a known sequence), the way a PyTorch
program reads plateau's stats when torch.cuda.memory_stats() throws for pluggable allocators."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])


class Stat(ctypes.Structure):  # pl_stat_t
    _fields_ = [(n, ctypes.c_int64) for n in ('current', 'peak', 'allocated', 'freed')]


class Stats(ctypes.Structure):  # pl_alloc_stats_t, as documented
    _fields_ = ([(n, Stat * 3) for n in ('allocation', 'segment', 'active', 'inactive_split', 'allocated_bytes',
                                          'reserved_bytes', 'active_bytes', 'inactive_split_bytes',
                                          'requested_bytes')]
                + [(n, ctypes.c_int64) for n in ('num_alloc_retries', 'num_ooms', 'num_device_alloc',
                                                  'num_device_free', 'num_device_map', 'num_device_unmap')]
                + [('largest_free_bytes', ctypes.c_size_t), ('releasable_bytes', ctypes.c_size_t),
                   ('fragmentation', ctypes.c_double), ('capacity_bytes', ctypes.c_size_t)])


lib.plateau_torch_malloc.restype = ctypes.c_void_p
lib.plateau_torch_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
lib.plateau_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
lib.plateau_torch_last_error.restype = ctypes.c_char_p

MiB = 1 << 20
s = Stats()
assert lib.plateau_torch_stats(0, ctypes.byref(s)) != 0, 'stats before the first malloc must fail'
p = lib.plateau_torch_malloc(3 * MiB, 0, None)
q = lib.plateau_torch_malloc(1000, 0, None)
assert p and q, lib.plateau_torch_last_error()
lib.plateau_torch_free(q, 1000, 0, None)
assert lib.plateau_torch_stats(0, ctypes.byref(s)) == 0
checks = {
    'allocation.current': (s.allocation[0].current, 1),
    'allocation.peak': (s.allocation[0].peak, 2),
    'allocated_bytes[large].current': (s.allocated_bytes[2].current, 3 * MiB),
    'requested_bytes[all].peak': (s.requested_bytes[0].peak, 3 * MiB + 1000),
    'reserved_bytes[all].current': (s.reserved_bytes[0].current, 2 * MiB + 20 * MiB),
    'segment[all].current': (s.segment[0].current, 2),
    'num_device_alloc': (s.num_device_alloc, 2),
    'num_ooms': (s.num_ooms, 0),
    'capacity_bytes': (s.capacity_bytes, 512 * MiB),
    'releasable_bytes': (s.releasable_bytes, 2 * MiB),
}
bad = {k: v for k, v in checks.items() if v[0] != v[1]}
lib.plateau_torch_free(p, 3 * MiB, 0, None)
lib.plateau_torch_release_all()
if bad:
    sys.exit('mismatch (got, want): %r' % bad)
print('ok: sizeof(Stats) = %d' % ctypes.sizeof(Stats))
