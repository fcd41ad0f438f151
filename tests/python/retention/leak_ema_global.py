# Leak: an exponential moving average of the loss kept as a tensor at module level (no .item(), no .detach()).
# expect: ema_loss
import torch

torch.manual_seed(0)
model = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
ema_loss = torch.zeros(())
for step in range(300):
    loss = model(torch.randn(8, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema_loss = 0.99 * ema_loss + 0.01 * loss
print(ema_loss.shape)
