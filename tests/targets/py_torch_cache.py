"""PyTorch CPU loop: a per-step cache dict that is never evicted (a new key every step)."""
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
cache = {}


def embed(step, x):
    key = ("batch", step)
    if key not in cache:
        cache[key] = x @ torch.randn(256, 256)  # LEAK
    return cache[key]


for step in range(200):
    x = torch.randn(64, 256)
    loss = (model(embed(step, x)) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", len(cache))
