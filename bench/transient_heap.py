"""A fast optimizer loop with a passing big heap: N steps of a 32-64-1 MLP under SGD (a few ms each on a CPU); at
the boundary after step FROM a list of BIG one-item lists is alive (what an evaluation pass or a data loader's cache
can leave for a step), so the live tensor count that runs there walks them and is slow; the rest of the run is
ordinary. bench/tensor_slow_count.sh runs it under plateau run (docs/python.md, "When a count runs").
  transient_heap.py [N=600] [FROM=8] [TO=9] [BIG=4000000]
"""
import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
lo = int(sys.argv[2]) if len(sys.argv) > 2 else 8
hi = int(sys.argv[3]) if len(sys.argv) > 3 else 9
big = int(sys.argv[4]) if len(sys.argv) > 4 else 4000000
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 32), torch.randn(64, 1)
heap = None
for step in range(n):
    if step == lo:
        heap = [[i] for i in range(big)]  # lists: tracked by the garbage collector, so gc.get_objects() lists them
    if step == hi:
        heap = None
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print("done")
