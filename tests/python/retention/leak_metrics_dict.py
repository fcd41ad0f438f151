# Leak: a metrics logger's dict of lists gets the loss tensor, not its value, at every step.
# expect: metrics['loss']
import torch

torch.manual_seed(0)
model = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
metrics = {"loss": [], "lr": []}
for step in range(300):
    loss = model(torch.randn(8, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    metrics["loss"].append(loss)
    metrics["lr"] = [0.01]
print(len(metrics["loss"]))
