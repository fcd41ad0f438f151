# Healthy control: a replay buffer bounded by deque(maxlen=...) that fills early, then stays full.
# expect: none
import collections

import torch

torch.manual_seed(0)
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
replay = collections.deque(maxlen=50)

for step in range(300):
    x = torch.randn(16, 64)
    replay.append(x.clone())
    batch = torch.stack(list(replay)[-8:])
    loss = model(batch).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(len(replay))
