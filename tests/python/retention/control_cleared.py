# Healthy control: per-epoch lists of detached outputs and loss values, cleared at the end of each 25-step epoch.
# expect: none
import torch

torch.manual_seed(0)
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
epoch_losses, epoch_outputs = [], []
for step in range(300):
    out = model(torch.randn(8, 32))
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    epoch_losses.append(loss.item())
    epoch_outputs.append(out.detach())
    if step % 25 == 24:
        mean = sum(epoch_losses) / len(epoch_losses)
        epoch_losses.clear()
        epoch_outputs.clear()
print(round(mean, 3) >= 0)
