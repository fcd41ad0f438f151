"""A torch >= 2.0 training loop over the stand-in torch of tests/python/torch2 (python.torch_allocator): it switches
to plateau's allocator with plateau.torch.use_allocator(), then each step makes 4 temporary CUDA tensors of 256 KiB
and keeps --keep bytes more (a device leak when > 0), and ends with one optimizer step (the bootstrap's step).
--init-first makes a CUDA tensor before the switch (torch then refuses it). The last line is JSON: what
use_allocator() returned, who served the tensors, and plateau.torch.memory_stats()."""
import argparse
import json

import torch

import plateau.torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--keep", type=int, default=1 << 20)
p.add_argument("--init-first", action="store_true")
args = p.parse_args()

first = torch.cuda.memory.empty(4096) if args.init_first else None
switched = plateau.torch.use_allocator()
opt = torch.optim.SGD()
kept = []
for it in range(args.steps):
    tmp = [torch.cuda.memory.empty(256 << 10) for _ in range(4)]
    if args.keep:
        kept.append(torch.cuda.memory.empty(args.keep))
    del tmp
    opt.step()
stats = plateau.torch.memory_stats()
again = plateau.torch.use_allocator() if switched else None  # CUDA is up now: still True, no refusal
print(json.dumps({"switched": switched, "again": again, "pluggable": torch.cuda.memory._current is not None,
                  "pluggable_calls": torch.cuda.memory.pluggable_calls, "native_live": torch.cuda.memory.native_live,
                  "stats": stats}))
