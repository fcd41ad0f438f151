"""An ordinary PyTorch CPU training script, as a user writes it, for the cost benchmark (bench/torch_overhead.sh).

A 2-layer transformer language model over random byte tokens, AdamW with a linear LR warmup and gradient
clipping, a training DataLoader with 2 persistent workers, and validation every 50 steps through a second
DataLoader whose 2 workers start and exit each time (the process churn that moves PSS). Unmarked: no plateau
imports, no step markers. --leak keeps every step's loss tensor (and its graph) in a list.
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
p.add_argument("--val-every", type=int, default=50)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=32)
p.add_argument("--width", type=int, default=64)
p.add_argument("--leak", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB = 256


class Tokens(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, VOCAB, (n, args.seq + 1), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        row = self.data[i]
        return row[:-1], row[1:]


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, args.width)
        self.pos = nn.Parameter(torch.zeros(1, args.seq, args.width))
        layer = nn.TransformerEncoderLayer(args.width, 4, 4 * args.width, dropout=0.1, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(args.width, VOCAB)
        self.register_buffer("mask", torch.triu(torch.full((args.seq, args.seq), float("-inf")), 1))

    def forward(self, x):
        h = self.blocks(self.emb(x) + self.pos, mask=self.mask)
        return self.head(h)


def main():
    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 30))
    train = DataLoader(Tokens(args.batch * 64, 1), batch_size=args.batch, shuffle=True, num_workers=2,
                       persistent_workers=True, drop_last=True)
    val = DataLoader(Tokens(args.batch * 4, 2), batch_size=args.batch, num_workers=2)
    loss_fn = nn.CrossEntropyLoss()
    kept = []
    step, t0 = 0, time.time()
    while step < args.steps:
        for x, y in train:
            model.train()
            loss = loss_fn(model(x).reshape(-1, VOCAB), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            if args.leak:
                kept.append(loss)
            step += 1
            if step % args.val_every == 0:
                model.eval()
                with torch.no_grad():
                    v = sum(loss_fn(model(a).reshape(-1, VOCAB), b.reshape(-1)).item() for a, b in val)
                print(f"step {step} loss {loss.item():.3f} val {v / len(val):.3f}", flush=True)
            if step >= args.steps:
                break
    print(f"done {step} steps in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
