# Leak: a class-level list shared by every instance keeps one tensor per step.
# expect: Probe.seen
import torch


class Probe:
    seen = []

    def record(self, t):
        self.seen.append(t)


torch.manual_seed(0)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    out = model(torch.randn(8, 32))
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    Probe().record(out)
print(len(Probe.seen))
