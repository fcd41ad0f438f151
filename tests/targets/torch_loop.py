"""A PyTorch CPU training loop for plateau's integration tests (the users' own setting: python train.py).

Marks each optimizer step with plateau_step() through ctypes when the tracer is preloaded.
--leak keeps every step's loss, and with it the step's autograd graph and activations, alive in a list: the
classic retained-graph leak of the seeds. Without --leak, memory warms up (optimizer state at step 1) and plateaus.
"""
import argparse
import ctypes

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
p.add_argument("--leak", action="store_true")
args = p.parse_args()

try:
    step_fn = ctypes.CDLL(None).plateau_step
except AttributeError:
    step_fn = None

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
kept = []
for step in range(args.steps):
    x = torch.randn(64, 256)
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward(retain_graph=args.leak)
    opt.step()
    if args.leak:
        kept.append(loss)  # the graph (and its saved activations) stays alive
    if step_fn:
        step_fn()
print(f"done: {args.steps} steps, loss {loss.item():.4f}, kept {len(kept)}")
