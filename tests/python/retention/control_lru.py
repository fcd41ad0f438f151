# Healthy control: an LRU cache of tensors (OrderedDict, at most 64 entries) that fills early, then stays full.
# expect: none
import collections

import torch


class LRU:
    def __init__(self, size):
        self.size = size
        self.data = collections.OrderedDict()

    def get(self, key, make):
        if key in self.data:
            self.data.move_to_end(key)
            return self.data[key]
        v = self.data[key] = make()
        if len(self.data) > self.size:
            self.data.popitem(last=False)
        return v


torch.manual_seed(0)
cache = LRU(64)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    mask = cache.get(step % 97, lambda: torch.rand(32) > 0.5)
    loss = (model(torch.randn(8, 32)) * mask).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(len(cache.data))
