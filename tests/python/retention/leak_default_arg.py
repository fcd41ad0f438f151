# Leak: a mutable default argument keeps every output it is given.
# expect: remember.seen
import torch


def remember(out, seen=[]):
    seen.append(out)
    return len(seen)


torch.manual_seed(0)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    out = model(torch.randn(8, 32))
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    n = remember(out)
print(n)
