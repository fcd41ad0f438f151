"""An unmodified PyTorch CPU training loop for python.autograd: a small MLP regressor under Adam.

--keep-graph: the classic `total_loss += loss` (the loss not detached: each step's autograd graph stays reachable
from total_loss.grad_fn); without it the loop accumulates `loss.item()`, the healthy form. --steps N (default 300),
--hidden H: the hidden layers' width (default 256); --eval-graph: also a validation loss per step accumulated outside
torch.no_grad() (its graph, never backpropagated, keeps the tensors it saved).
Prints the mean loss, a number, the same with and without plateau.
"""
import argparse

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--keep-graph", action="store_true")
p.add_argument("--hidden", type=int, default=256)
p.add_argument("--eval-graph", action="store_true")
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
H = args.hidden
model = torch.nn.Sequential(torch.nn.Linear(128, H), torch.nn.ReLU(), torch.nn.Linear(H, H), torch.nn.ReLU(),
                            torch.nn.Linear(H, 1))  # (B,128) -> (B,1)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
w = torch.randn(128, 1)


def train(steps):
    total_loss = val_loss = 0.0
    for step in range(steps):
        x = torch.randn(64, 128)
        loss = (model(x) - x @ w).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if args.keep_graph:
            total_loss += loss  # keeps the graph: total_loss.grad_fn -> every step's nodes
        else:
            total_loss += loss.item()
        if args.eval_graph:
            xv = torch.randn(16, 128)
            val_loss += (model(xv) - xv @ w).pow(2).mean()  # no torch.no_grad(): the graph and its saved tensors stay
    return float(total_loss) / steps


print("%.3f" % train(args.steps))
