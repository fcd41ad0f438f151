"""A PyTorch CPU training loop for plateau's integration tests (the users' own setting: python train.py).

Marks each optimizer step with plateau_step() through ctypes when the tracer is preloaded (unless --no-mark: the
period detector's measurement runs it unmarked, or marked for ground truth and detects from the allocations alone).
--leak keeps every step's loss, and with it the step's autograd graph and activations, alive in a list: the
classic retained-graph leak of the seeds. Without --leak, memory warms up (optimizer state at step 1) and plateaus.
--model mlp (default: 256-512-256, GELU) or conv (a small conv net on 1x28x28 images); --batch, --threads, --width.
"""
import argparse
import ctypes

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
p.add_argument("--leak", action="store_true")
p.add_argument("--no-mark", action="store_true")
p.add_argument("--model", choices=["mlp", "conv"], default="mlp")
p.add_argument("--batch", type=int, default=64)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--width", type=int, default=512)
args = p.parse_args()

step_fn = None
if not args.no_mark:
    try:
        step_fn = ctypes.CDLL(None).plateau_step
    except AttributeError:
        pass

torch.manual_seed(0)
torch.set_num_threads(args.threads)
if args.model == "mlp":
    model = torch.nn.Sequential(torch.nn.Linear(256, args.width), torch.nn.GELU(), torch.nn.Linear(args.width, 256))

    def batch():
        x = torch.randn(args.batch, 256)  # (B, 256)
        return x, x
else:
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),    # (B,8,14,14)
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),   # (B,16,7,7)
        torch.nn.Flatten(), torch.nn.Linear(16 * 7 * 7, 10))                            # (B,10)

    def batch():
        return torch.randn(args.batch, 1, 28, 28), torch.randn(args.batch, 10)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
kept = []
for step in range(args.steps):
    x, y = batch()
    loss = (model(x) - y).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward(retain_graph=args.leak)
    opt.step()
    if args.leak:
        kept.append(loss)  # the graph (and its saved activations) stays alive
    if step_fn:
        step_fn()
print(f"done: {args.steps} steps, loss {loss.item():.4f}, kept {len(kept)}")
