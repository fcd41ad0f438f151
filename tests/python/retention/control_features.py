# Healthy control: a large, fixed table of 20000 feature tensors (a dict built once), looked up at every step.
# expect: none
import torch

torch.manual_seed(0)
features = {i: torch.randn(64) for i in range(20000)}
model = torch.nn.Linear(64, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
seen = set()
for step in range(300):
    keys = [(step * 7 + j) % 20000 for j in range(16)]
    seen.update(k % 50 for k in keys)
    x = torch.stack([features[k] for k in keys])
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(len(features), len(seen))
