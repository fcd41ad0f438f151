# Leak: each step's logits (a 1 MiB tensor with its graph) kept in a list for a later metric, never detached.
# expect: all_logits
# allocated-at: logits = model(x)
import torch

torch.manual_seed(0)
model = torch.nn.Linear(1024, 1024)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
all_logits = []

for step in range(120):
    x = torch.randn(256, 1024)
    logits = model(x)
    loss = logits.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    all_logits.append(logits)
print(len(all_logits))
