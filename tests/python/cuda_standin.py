"""A PyTorch CPU training script with a scripted stand-in for torch's CUDA caching allocator (python.torch_counters).

No GPU here: after `import torch` the script makes torch.cuda look initialised with one device and replaces only
the lowest layer torch.cuda.memory_stats() reads (torch._C._cuda_memoryStats, the C++ allocator's nested stats)
and the device queries. torch.cuda.is_initialized() and memory_stats_as_nested_dict() are torch's own, so the
bootstrap (python/plateau/_torchstats.py) runs its real call path. The counters follow --mode per iteration:
  leak     allocated grows 4 MiB and 10 live blocks per step (reserved follows)
  frag     allocated flat; reserved and inactive_split grow 2 MiB per step
  retries  everything flat; num_alloc_retries reaches 3, num_ooms 1
  flat     everything flat
  raises   torch._C._cuda_memoryStats raises (after the script's own first call): the program must not notice
--tensors N: also keep N CPU tensors more per step (host live tensors grow), for the first --tensor-steps steps
(default all: a leak; fewer: a cache that warms up, then a plateau). --cuda-tensors N: keep N stand-in CUDA tensors
more per step on each of --devices devices, device d keeping N * (d + 1) (a torch.Tensor subclass whose
get_device() says d: what the bootstrap's per-device count reads). --oom-at N: at step N, raise torch's
torch.cuda.OutOfMemoryError (as the caching allocator raises it on a GPU) and let it end the program uncaught
(docs/end-of-run.md). No plateau import.
"""
import argparse

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=160)
p.add_argument("--mode", default="flat", choices=["leak", "frag", "retries", "flat", "raises"])
p.add_argument("--tensors", type=int, default=0)
p.add_argument("--tensor-steps", type=int, default=-1)
p.add_argument("--cuda-tensors", type=int, default=0)
p.add_argument("--devices", type=int, default=1)
p.add_argument("--oom-at", type=int, default=0)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
MiB = 1 << 20
step = 0
in_oom = False


def pools(current, peak):
    one = {"current": current, "peak": peak, "allocated": current, "freed": 0}
    return {"all": dict(one), "small_pool": dict(one, current=0, peak=0), "large_pool": dict(one)}


def scripted_stats(device):
    """torch._C._cuda_memoryStats(device): the nested dict of the C++ caching allocator, scripted by `step`."""
    if args.mode == "raises" and step > 0:
        raise RuntimeError("CUDA error: an illegal memory access was encountered (stand-in)")
    alloc, blocks, reserved, split, retries, ooms = 100 * MiB, 500, 128 * MiB, 2 * MiB, 0, 0
    if in_oom:  # what the allocator holds when it gives up: the counters differ from every step's snapshot
        return scripted_stats_at(alloc + 900 * MiB, blocks, reserved + 1000 * MiB, split + 96 * MiB, retries + 1,
                                 ooms + 1)
    if args.mode == "leak":
        alloc += 4 * MiB * step
        blocks += 10 * step
        reserved = alloc + 28 * MiB
    elif args.mode == "frag":
        alloc += (step % 3) * 64 * 1024  # a little noise around a flat level
        reserved += 2 * MiB * step
        split += 2 * MiB * step
    elif args.mode == "retries":
        retries = min(step // 40, 3)
        ooms = 1 if step >= 100 else 0
    return scripted_stats_at(alloc, blocks, reserved, split, retries, ooms)


def scripted_stats_at(alloc, blocks, reserved, split, retries, ooms):
    return {"allocated_bytes": pools(alloc, alloc), "reserved_bytes": pools(reserved, reserved),
            "active_bytes": pools(alloc, alloc), "inactive_split_bytes": pools(split, split),
            "requested_bytes": pools(alloc, alloc), "allocation": pools(blocks, blocks),
            "segment": pools(8, 8), "active": pools(blocks, blocks), "inactive_split": pools(3, 3),
            "num_alloc_retries": retries, "num_ooms": ooms, "max_split_size": -1, "oversize_allocations": pools(0, 0),
            "oversize_segments": pools(0, 0)}


class Props:
    name = "stand-in GPU"
    total_memory = 16 << 30


torch.cuda._initialized = True                      # what torch.cuda._lazy_init() sets once CUDA is up
torch._C._cuda_memoryStats = scripted_stats
torch.cuda._get_device_properties = lambda d: Props()  # what torch._C._cuda_init() defines on a GPU
torch.cuda.device_count = lambda: args.devices


class CudaTensor(torch.Tensor):
    """A tensor that says it lives on a CUDA device (only get_device(), what the live tensor count asks)."""
    def get_device(self):
        return self.device_index


def cuda_tensor(d):
    t = CudaTensor(1)  # not as_subclass: its alias keeps the plain tensor's Python object alive (a host tensor)
    t.device_index = d
    return t


assert torch.cuda.is_initialized() and torch.cuda.memory_stats(0)["allocated_bytes.all.current"] == 100 * MiB

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))  # (B,16) -> (B,8)
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
kept = []
for it in range(args.steps):
    step = it + 1
    opt.zero_grad(set_to_none=True)
    loss = model(torch.randn(4, 16)).pow(2).mean()
    loss.backward()
    opt.step()
    if step == args.oom_at:
        in_oom = True  # noqa: F841 (read by scripted_stats)
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (stand-in on the CPU)")
    if args.tensor_steps < 0 or it < args.tensor_steps:
        kept.extend(torch.zeros(1) for _ in range(args.tensors))
        kept.extend(cuda_tensor(d) for d in range(args.devices) for _ in range(args.cuda_tensors * (d + 1)))
print(f"cuda_standin.py: {args.steps} steps, mode {args.mode}, {len(kept)} tensors kept")
