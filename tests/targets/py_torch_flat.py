"""PyTorch CPU loop that leaks nothing: memory warms up (optimizer state) and plateaus."""
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
last = None
for step in range(200):
    x = torch.randn(64, 256)
    out = model(x)
    loss = (out - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    last = out.detach()
print("done", float(loss))
