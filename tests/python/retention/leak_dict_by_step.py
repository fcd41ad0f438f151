# Leak: a dict keyed by step keeps every step's loss tensor (and its autograd graph).
# expect: loss_by_step
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_by_step = {}

for step in range(300):
    x = torch.randn(16, 32)
    loss = (model(x) - 1).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    loss_by_step[step] = loss
print(len(loss_by_step))
