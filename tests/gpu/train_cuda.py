"""A small torch 2 CUDA training loop for the GPU check (tools/gpu-check.sh, docs/gpu-check.md), unmodified for
plateau: no `import plateau`, steps come from the optimizer.

  --mode leak     every step keeps one 1 MiB CUDA tensor in a list, at the line marked `gpu-check: leak`
  --mode healthy  a cache keyed by step % 30 fills for 30 steps, then stays: a warmup that plateaus
--cleanup N       every N steps gc.collect() and torch.cuda.empty_cache(), as users sprinkle them in
--stats FILE      at the end, torch's own view as JSON: torch.cuda.memory_stats() (the keys plateau compares),
                  the steps, the training loop's seconds, the losses
--snapshot FILE   at the end, torch.cuda.memory._snapshot() pickled (what --torch-snapshot is compared with)
Exits 77 with one line when torch has no CUDA device (the check's SKIP).
"""
import argparse
import gc
import json
import pickle
import sys
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["leak", "healthy"], default="healthy")
p.add_argument("--steps", type=int, default=200)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--cleanup", type=int, default=0, help="every N steps gc.collect() and torch.cuda.empty_cache()")
p.add_argument("--stats")
p.add_argument("--snapshot")
args = p.parse_args()

if not torch.cuda.is_available():
    print("train_cuda: torch %s sees no CUDA device" % torch.__version__, file=sys.stderr)
    sys.exit(77)

dev = torch.device("cuda", 0)
torch.manual_seed(args.seed)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512),
                            torch.nn.GELU(), torch.nn.Linear(512, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
gen = torch.Generator(device=dev)
gen.manual_seed(args.seed)
kept = []        # --mode leak: grows one tensor per step
cache = {}       # --mode healthy: at most 30 entries
losses = []

t0 = time.perf_counter()
t_half = None    # when the second half of the steps starts: its time is the steady state, the first half's the start
for step in range(args.steps):
    if step == args.steps // 2:
        torch.cuda.synchronize()
        t_half = time.perf_counter()
    x = torch.randn(64, 512, device=dev, generator=gen)          # (B, C) = (64, 512)
    y = torch.randint(0, 10, (64,), device=dev, generator=gen)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if args.mode == "leak":
        kept.append(torch.full((256 * 1024,), float(step), device=dev))  # gpu-check: leak (1 MiB a step)
    else:
        cache[step % 30] = torch.full((256 * 1024,), float(step), device=dev)
    if args.cleanup and step % args.cleanup == 0:  # what users sprinkle in: the reserved memory saws, no leak
        gc.collect()
        torch.cuda.empty_cache()
    if step % 10 == 0 or step == args.steps - 1:
        losses.append([step, loss.item()])
torch.cuda.synchronize()
t_end = time.perf_counter()
loop_s = t_end - t0

if args.stats:
    stats = torch.cuda.memory_stats()
    keys = ("allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
            "reserved_bytes.all.current", "reserved_bytes.all.peak", "reserved_bytes.all.allocated",
            "segment.all.current", "segment.all.allocated", "allocation.all.current", "num_alloc_retries",
            "num_ooms")
    live = sum(t.numel() * t.element_size() for t in kept) + sum(t.numel() * t.element_size() for t in cache.values())
    with open(args.stats, "w") as f:
        json.dump({"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
                   "steps": args.steps, "loop_seconds": loop_s,
                   "second_half_seconds": t_end - t_half if t_half else None, "losses": losses, "kept_bytes": live,
                   "stats": {k: stats.get(k) for k in keys}}, f)
if args.snapshot:
    with open(args.snapshot, "wb") as f:
        pickle.dump(torch.cuda.memory._snapshot(), f)
print("train_cuda: %d steps (%s) in %.2f s, loss %.4f -> %.4f" % (args.steps, args.mode, loop_s, losses[0][1],
                                                                 losses[-1][1]))
