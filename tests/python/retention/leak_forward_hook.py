# Leak: a forward hook registered at every step (and never removed) keeps one more closure, and its tensors, per step.
# expect: model._forward_hooks
# line-has: register_forward_hook
import torch

torch.manual_seed(0)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
activations = {}

for step in range(300):
    def save(module, inp, out, step=step):
        activations[step % 4] = out.detach()
    model.register_forward_hook(save)
    x = torch.randn(8, 32)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(len(activations))
