# Leak: a callback object in a list of callbacks keeps trainer.loss (a tensor with its graph) at every batch end.
# expect: callbacks[0].losses
import torch


class LossHistory:
    def __init__(self):
        self.losses = []

    def on_batch_end(self, trainer):
        self.losses.append(trainer.loss)


class Trainer:
    def __init__(self, callbacks):
        self.callbacks = callbacks
        self.model = torch.nn.Linear(32, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.loss = None

    def fit(self, steps):
        for step in range(steps):
            self.loss = self.model(torch.randn(8, 32)).pow(2).mean()
            self.opt.zero_grad()
            self.loss.backward()
            self.opt.step()
            for cb in self.callbacks:
                cb.on_batch_end(self)


torch.manual_seed(0)
callbacks = [LossHistory()]
Trainer(callbacks).fit(300)
print(len(callbacks[0].losses))
