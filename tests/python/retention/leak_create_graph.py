# Leak: backward(create_graph=True) for a gradient penalty, gradients never reset: each parameter's .grad keeps an
# autograd graph that grows every step (the reference cycle torch warns about).
# expect: model.weight.grad
# line-has: create_graph=True
import warnings

import torch

warnings.simplefilter("ignore")
torch.manual_seed(0)
model = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
for step in range(300):
    loss = model(torch.randn(8, 32)).pow(2).mean()
    loss.backward(create_graph=True)
    opt.step()
print(model.weight.grad is not None)
