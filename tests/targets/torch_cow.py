"""DataLoader workers that read their parent's list of Python objects: copy-on-access, not a leak (docs/verdict.md,
"Copy-on-access workers"), and a worker that really leaks. The end-to-end target of tests/cli/test_cow.sh.

The dataset is a Python list of --items strings built in the trainer before the loader forks its --workers
persistent workers. A worker reading a string writes its reference count, so the kernel copies the page that holds
it: each worker's private memory (its PSS) climbs while its RSS and its live heap stay flat, up to the part of the
parent's heap it reads. Each batch (one index, batch_size=None) reads two slices of the list, its own and the next
batch's, so over --steps steps each worker reads the whole list once. A small MLP trains on the batches; steps come from the optimizer (the
script never calls plateau). --step-s paces the loop so that the workers live long enough for PSS samples (one
every 5 s). --leak: each worker also keeps 256 KiB per batch it makes (a per-worker cache that is never emptied).
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--items", type=int, default=1_500_000)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--step-s", type=float, default=0.1)
p.add_argument("--leak", action="store_true")
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
FEAT = 32


class Rows(Dataset):
    def __init__(self, n_items, n_batches):
        self.rows = ["row %09d of the corpus" % i for i in range(n_items)]  # Python objects, one per row
        self.n_batches = n_batches
        self.per = n_items // n_batches
        self.kept = []

    def __len__(self):
        return self.n_batches

    def __getitem__(self, i):
        n = 0
        j = (i + 1) % self.n_batches  # and the next batch's rows: each worker reads the whole list once
        for s in self.rows[i * self.per:(i + 1) * self.per] + self.rows[j * self.per:(j + 1) * self.per]:
            n += len(s)  # reading a row writes its reference count
        if args.leak:
            self.kept.append(torch.ones(64 * 1024))  # 256 KiB kept per batch, in this worker only
        x = torch.full((16, FEAT), float(n % 7))
        return x, torch.randint(0, 4, (16,))


model = torch.nn.Sequential(torch.nn.Linear(FEAT, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
lossf = torch.nn.CrossEntropyLoss()
loader = DataLoader(Rows(args.items, args.steps), batch_size=None, num_workers=args.workers,
                    persistent_workers=True)
for x, y in loader:
    loss = lossf(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    time.sleep(args.step_s)
