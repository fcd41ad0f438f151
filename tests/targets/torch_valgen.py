"""Validation workers whose memory grows from one validation pass to the next (issue 17, workers), and a healthy
variant: the generation rule's end-to-end target (tests/cli/test_valgen.sh, docs/verdict.md §8).

A small MLP trains on random features (one plateau_step() per optimizer step when the tracer is preloaded);
every --val-every steps a validation DataLoader with --workers workers runs one pass and its workers exit. Each
pass appends the indices of its worst samples to the validation set's `hard` list (a few integers in the trainer).
--leak: each validation worker caches an augmented copy of every hard example once, when it starts (1 MiB per
listed pass): the cache lives in the workers only, so every generation of workers holds ~1 MiB more than the last,
while the trainer's own heap stays flat. Without --leak the workers cache only the current pass's hard examples.
"""
import argparse
import ctypes

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=80)
p.add_argument("--val-every", type=int, default=10)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--leak", action="store_true")
args = p.parse_args()

step_fn = getattr(ctypes.CDLL(None), "plateau_step", lambda: None)
torch.manual_seed(0)
torch.set_num_threads(1)
FEAT = 64


class Val(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, FEAT, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)
        self.hard = []  # one entry per pass: that pass's hardest sample indices
        self.cache = None

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.cache is None:  # built once per worker, on its first sample
            passes = self.hard if args.leak else self.hard[-1:]
            self.cache = [torch.randn(len(idx), 256 * 1024 // len(idx)) for idx in passes]  # 1 MiB per pass
        return self.x[i], self.y[i]


model = torch.nn.Sequential(torch.nn.Linear(FEAT, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
lossf = torch.nn.CrossEntropyLoss()
val_set = Val(256)
val = DataLoader(val_set, batch_size=64, num_workers=args.workers)
for step in range(1, args.steps + 1):
    x, y = torch.randn(32, FEAT), torch.randint(0, 4, (32,))
    loss = lossf(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    step_fn()
    if step % args.val_every == 0:
        with torch.no_grad():
            losses = torch.cat([torch.nn.functional.cross_entropy(model(vx), vy, reduction="none") for vx, vy in val])
        val_set.hard.append(losses.topk(4).indices.tolist())
print(f"done: {args.steps} steps, {len(val_set.hard)} validation passes, leak={args.leak}")
