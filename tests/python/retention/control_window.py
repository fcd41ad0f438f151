# Healthy control: a sliding window of the last 20 detached outputs, rebound to a new list at each step, and a
# replay buffer list trimmed to 200 entries once full.
# expect: none
import torch

torch.manual_seed(0)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
window, buffer = [], []
for step in range(300):
    out = model(torch.randn(8, 32))
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    window = (window + [out.detach()])[-20:]
    buffer.append(out.detach())
    if len(buffer) > 40:
        del buffer[0]
print(len(window), len(buffer))
