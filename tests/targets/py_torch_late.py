"""PyTorch CPU loop that is flat for 80 steps, then starts keeping every step's output."""
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
kept = []
for step in range(240):
    x = torch.randn(64, 256)
    out = model(x)
    loss = (out - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    snapshot = out.detach() * 1.0  # LEAK (from step 80 on, this allocation is kept)
    if step >= 80:
        kept.append(snapshot)
print("done", len(kept))
