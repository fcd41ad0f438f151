# Leak: every step's outputs appended to a global list without .detach().
# expect: outputs
import torch

torch.manual_seed(0)
model = torch.nn.Linear(64, 64)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
outputs = []

for step in range(300):
    x = torch.randn(16, 64)
    out = model(x)
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    outputs.append(out)
print(len(outputs))
