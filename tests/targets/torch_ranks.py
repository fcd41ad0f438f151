"""Data-parallel PyTorch CPU training, one process per rank (torchrun, or any launcher that sets RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT): gloo, DistributedDataParallel, SGD. With --leak-rank R that rank alone keeps one
--leak-kib tensor per step (metrics kept on one rank only, the ordinary shape of a one-rank leak); the others
stay flat. Prints "rank R done STEPS kept N" at the end.
usage: torch_ranks.py [--steps N] [--leak-rank R] [--leak-kib K]"""
import argparse
import os

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=150)
ap.add_argument("--leak-rank", type=int, default=-1)
ap.add_argument("--leak-kib", type=int, default=512)
args = ap.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 128)))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
kept = []
for step in range(args.steps):
    x = torch.randn(32, 128)
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()  # DDP all-reduces the gradients over gloo
    opt.step()
    if rank == args.leak_rank:
        kept.append(torch.full((args.leak_kib * 256,), float(step)))  # LEAK: one rank's per-step record
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} done {args.steps} kept {len(kept)}", flush=True)
