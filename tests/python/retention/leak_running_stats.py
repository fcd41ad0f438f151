# Leak: running statistics updated outside torch.no_grad() on a module attribute: running_min's autograd graph grows
# by a node per step (the quantizer of a QAT model).
# expect: model.quant.running_min
import torch


class Quantizer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.running_min = torch.zeros(())

    def forward(self, x):
        self.running_min = 0.9 * self.running_min + 0.1 * x.min()
        return x - self.running_min


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)
        self.quant = Quantizer()

    def forward(self, x):
        return self.quant(self.lin(x))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    x = torch.randn(8, 32)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
print(model.quant.running_min.shape)
