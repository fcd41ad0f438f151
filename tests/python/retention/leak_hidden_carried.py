# Leak: a trainer keeps a running state across steps without .detach() (self.state = ... + out.mean(0)): every step's
# graph, with the inputs it saved, stays chained to it.
# expect: trainer.state
import torch


class Trainer:
    def __init__(self):
        self.model = torch.nn.Linear(64, 16)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.state = torch.zeros(16)

    def step(self, x):
        out = self.model(x)
        loss = out.pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.state = 0.5 * self.state + out.mean(0)
        return loss.item()


torch.manual_seed(0)
trainer = Trainer()
for step in range(300):
    last = trainer.step(torch.randn(32, 64))
print(round(last, 6) >= 0)
