"""An ordinary PyTorch training script, the shape of issue 17: a 2-layer transformer LM, AdamW with LR warmup and
gradient clipping, a train DataLoader(num_workers=2, persistent_workers=True), validation every --val-every steps
through a second 2-worker DataLoader (workers start and exit at each validation).

--leak picks one of the seeds' leaks (none by default: the healthy script):
  loss    total_loss += loss      (the graph of every step stays alive)
  outputs outputs appended to a list
  cache   a per-step cache dict that keeps 0.5 MiB of new host tensors each step
--no-mark runs unmarked (plateau finds steps by period detection or uses time buckets); by default each optimizer
step calls plateau_step() when the tracer is preloaded, and nothing otherwise. --print-steps prints "step N" after
each step (the log plateau attach --steps-from follows).
"""
import argparse
import ctypes
import math

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--leak", choices=["none", "loss", "outputs", "cache"], default="none")
p.add_argument("--no-mark", action="store_true")
p.add_argument("--val-every", type=int, default=50)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--seq", type=int, default=32)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--print-steps", action="store_true", help="print 'step N' after each step (a log to follow)")
args = p.parse_args()

step_fn = (lambda: None) if args.no_mark else getattr(ctypes.CDLL(None), "plateau_step", lambda: None)
torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB, D = 128, 64


class Tokens(Dataset):
    """Byte-level random token windows (no downloads): x = tokens[0:T], y = tokens[1:T+1]."""

    def __init__(self, n, seq, seed):
        g = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, VOCAB, (n, seq + 1), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i, :-1], self.data[i, 1:]


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, D)
        self.pos = torch.nn.Embedding(args.seq, D)
        layer = torch.nn.TransformerEncoderLayer(D, 4, 4 * D, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, 2)
        self.head = torch.nn.Linear(D, VOCAB)
        self.register_buffer("mask", torch.triu(torch.full((args.seq, args.seq), float("-inf")), 1))

    def forward(self, x):  # x (B,T) -> logits (B,T,V)
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        return self.head(self.blocks(h, mask=self.mask))


model = LM()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
warm = 30
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
train = DataLoader(Tokens(4096, args.seq, 1), batch_size=args.batch, shuffle=True, num_workers=args.workers,
                   persistent_workers=args.workers > 0)
val = DataLoader(Tokens(128, args.seq, 2), batch_size=32, num_workers=args.workers)
lossf = torch.nn.CrossEntropyLoss()

total_loss, outputs, cache = 0.0, [], {}
vl = float("nan")  # no validation pass yet (--val-every above --steps: none)
step = 0
it = iter(train)
while step < args.steps:
    try:
        x, y = next(it)
    except StopIteration:
        it = iter(train)
        continue
    logits = model(x)
    loss = lossf(logits.reshape(-1, VOCAB), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    if args.leak == "loss":
        total_loss += loss  # keeps every step's graph alive
    else:
        total_loss += loss.item()
    if args.leak == "outputs":
        outputs.append(logits)
    if args.leak == "cache":
        cache[step] = torch.randn(128 * 1024)  # 512 KiB of live host memory per step
    step += 1
    step_fn()
    if args.print_steps:
        print(f"step {step}", flush=True)
    if step % args.val_every == 0:
        model.eval()
        with torch.no_grad():
            vl = sum(lossf(model(vx).reshape(-1, VOCAB), vy.reshape(-1)).item() for vx, vy in val)
        model.train()
print(f"done: {step} steps, mean loss {float(total_loss) / step:.3f}, val {vl:.3f}, leak={args.leak}")
