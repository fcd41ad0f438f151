"""PyTorch CPU loop: running statistics re-created each forward and kept in a dict keyed by step. The statistics
are not detached, so their graph keeps the forward's output alive as well: both lines are marked."""
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
stats = {}


def forward(x, step):
    out = model(x)  # LEAK (kept too: std and amax save their input for backward)
    stats[step] = torch.stack([out.mean(0), out.std(0), out.amax(0), out.amin(0)] * 16)  # LEAK
    return out


for step in range(200):
    x = torch.randn(64, 256)
    loss = (forward(x, step) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", len(stats))
