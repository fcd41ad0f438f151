#!/usr/bin/env python3
"""Cost of what the Python bootstrap does per optimizer step beyond the step itself (python/plateau/_torchstats.py):
one live tensor count (gc.get_objects() filtered by type) and one torch.cuda.memory_stats() per device handed to
plateau_alloc_stats(). Run it under the tracer, with /usr/bin/python3 (torch):

    build/cli/plateau run --no-report -o /tmp/b -- /usr/bin/python3 bench/torch_counters.py [LAYERS]
    PLATEAU_TENSOR_BUDGET=B build/cli/plateau run --no-report -o /tmp/b -- \
        /usr/bin/python3 bench/torch_counters.py LAYERS train N     (N training steps: wall time, counts made)

A model of LAYERS (default 1000) Linear(64, 64) layers under Adam, after 3 steps (parameters, gradients and
optimizer state all alive; 4 tensors per Linear parameter), plus the objects torch itself holds. CUDA is a
stand-in (tests/python/cuda_standin.py's scripted torch._C._cuda_memoryStats behind torch's own memory_stats()),
so memory_stats() costs its real Python part (flattening ~100 keys) and nothing of the C++ allocator's. Prints
medians over repeats (perf_counter), and the steps between counts that the 1 % budget gives for a step time.
"""
import gc
import statistics
import sys
import time

import torch


def bootstrap_module(name):
    """The bootstrap's copy of plateau.NAME under plateau run (it loads the package as _plateau_bootstrap, and its
    copy is the one counting), else the public one."""
    import importlib
    return sys.modules.get("_plateau_bootstrap." + name) or importlib.import_module("plateau." + name)


layers = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(layers)])  # (B,64) -> (B,64)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
for _ in range(3):
    opt.zero_grad(set_to_none=True)
    model(torch.randn(8, 64)).pow(2).mean().backward()
    opt.step()
if len(sys.argv) > 3 and sys.argv[2] == "train":
    _torchstats = bootstrap_module("_torchstats")
    t0 = time.perf_counter()
    for _ in range(int(sys.argv[3])):
        opt.zero_grad(set_to_none=True)
        model(torch.randn(8, 64)).pow(2).mean().backward()
        opt.step()
    dt = time.perf_counter() - t0
    print(f"train {sys.argv[3]} steps: {dt:.2f} s, {dt / int(sys.argv[3]) * 1000:.1f} ms/step; "
          f"{_torchstats.n_counts} counts, {_torchstats.count_seconds:.3f} s counting "
          f"({100 * _torchstats.count_seconds / dt:.2f} %)")
    sys.exit(0)
for p in model.parameters():  # make the gradients' Python objects exist, as a script reading them would
    _ = p.grad

_native, _torchstats = bootstrap_module("_native"), bootstrap_module("_torchstats")

f = _native.get("plateau_alloc_stats")
if f is None:
    sys.exit("run under plateau run: plateau_alloc_stats is not exported here")


def median_us(fn, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6, min(ts) * 1e6


counts = _torchstats.count_tensors()
n_objs = len(gc.get_objects())
med, lo = median_us(_torchstats.count_tensors, 21)
print(f"layers {layers}: {counts[-1]} live tensors among {n_objs} gc objects: count median {med / 1000:.2f} ms, "
      f"min {lo / 1000:.2f} ms ({med * 1000 / n_objs:.1f} ns per gc object)")
for step_ms in (1, 10, 100, 1000):
    every = max(1.0, med / 1000 * (1 / 0.01 - 1) / step_ms)
    print(f"  1 % budget, {step_ms} ms steps: a count every {every:.0f} steps")

# torch.cuda.memory_stats() through torch's own code, one device, plus the record
MiB = 1 << 20


def pools(v):
    one = {"current": v, "peak": v, "allocated": v, "freed": 0}
    return {"all": dict(one), "small_pool": dict(one), "large_pool": dict(one)}


stats = {k: pools(100 * MiB) for k in ("allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes",
                                       "requested_bytes", "allocation", "segment", "active", "inactive_split",
                                       "inactive_split", "oversize_allocations", "oversize_segments")}
stats.update(num_alloc_retries=0, num_ooms=0, max_split_size=-1)
torch.cuda._initialized = True
torch._C._cuda_memoryStats = lambda d: stats
torch.cuda.device_count = lambda: 1
torch.cuda._get_device_properties = lambda d: type("P", (), {"total_memory": 16 << 30})()
assert _torchstats.cuda_stats(f) == 1
med, lo = median_us(lambda: _torchstats.cuda_stats(f), 2001)
print(f"memory_stats_as_nested_dict + plateau_alloc_stats, 1 device: median {med:.1f} us, min {lo:.1f} us per step")
med, lo = median_us(lambda: torch.cuda.memory_stats(0), 2001)
print(f"  torch.cuda.memory_stats(0) (the flattened form, not used): median {med:.1f} us")
